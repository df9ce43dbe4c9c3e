#!/usr/bin/python3
"""fit_erf.py - the coefficient table of rc_erff (simd/ops.c), reproducible.

erf on |x| < 4 is split into 8 intervals of width 0.5 (interval i = floor(2|x|)):
  i = 0 : erf(a) = a * P0(a*a)              (odd function: keeps full relative accuracy near 0)
  i > 0 : erf(a) = Pi(a - (0.5*i + 0.25))   (|t| <= 0.25)
each P of degree DEG, evaluated in double with fma (Horner), rounded once to float.
The fit is a Chebyshev interpolation in double against math.erf; the script prints the max
relative error of each polynomial (target: far below a float ulp, so the float result is the
correctly rounded erf except in rare near-ties).
usage: /usr/bin/python3 tools/fit_erf.py > coefficients (pasted into simd/ops.c)
"""
import math
import numpy as np

DEG = 10


def fit(f, lo, hi):
    # Chebyshev nodes on [lo, hi], interpolate, convert to power basis in t
    n = DEG + 1
    k = np.arange(n)
    nodes = np.cos((2 * k + 1) * np.pi / (2 * n))
    t = 0.5 * (hi - lo) * nodes + 0.5 * (hi + lo)
    y = np.array([f(v) for v in t])
    c = np.polynomial.chebyshev.Chebyshev.fit(t, y, DEG, domain=[lo, hi])
    return c.convert(kind=np.polynomial.Polynomial).coef


def horner(c, t):
    p = c[-1]
    for v in c[-2::-1]:
        p = p * t + v
    return p


def main():
    rows = []
    worst = []
    # interval 0: erf(a)/a as a function of s = a*a on [0, 0.25]
    f0 = lambda s: math.erf(math.sqrt(s)) / math.sqrt(s) if s > 0 else 2 / math.sqrt(math.pi)
    c0 = fit(f0, 0.0, 0.25)
    rows.append(c0)
    a = np.linspace(1e-6, 0.5, 20001)
    worst.append(max(abs(a_ * horner(c0, a_ * a_) - math.erf(a_)) / math.erf(a_) for a_ in a))
    for i in range(1, 8):
        cen = 0.5 * i + 0.25
        ci = fit(lambda t: math.erf(cen + t), -0.25, 0.25)
        rows.append(ci)
        t = np.linspace(-0.25, 0.25, 20001)
        worst.append(max(abs(horner(ci, t_) - math.erf(cen + t_)) / math.erf(cen + t_) for t_ in t))
    print("/* rc_erff coefficients: tools/fit_erf.py, DEG = %d; max rel. error per interval:" % DEG)
    print(" *   " + " ".join("%.1e" % w for w in worst) + " */")
    print("const double rc_erf_coef[RC_ERF_DEG + 1][8] = { /* [power][interval] */")
    for p in range(DEG + 1):
        print("    {" + ", ".join(float(r[p]).hex() for r in rows) + "},")
    print("};")


main()
