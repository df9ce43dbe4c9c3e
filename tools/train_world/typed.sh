#!/bin/sh
# typed.sh - the trained world on 20 facts typed as a person would (none of them from a bench
# file), each told and asked in a person's words, through `recall chat`:
#   sh tools/train_world/typed.sh [BLOB] [CHAT OPTIONS...]
# TYPED_SET=2: twenty more facts, each told and asked in words the world's phrasing grammar
# never generates (world_broad.py), with keywords and values of their own.
# For each fact three chats: "in view" (the fact, then the question), "at the edge" (the fact, one
# casual line, then the question: the fact leaves the world's 96-token window while the reply is
# written) and "evicted" (the fact, six casual lines, then the question: the fact has scrolled out
# and only recall can bring it back). Prints a Markdown table: the fact, the question, the reply
# after the last </think> in each chat, and whether it is the value. docs/WORLD.md gives its figures,
# bench/NOTES.md ("The trained world: measured, in full") runs of it chat by chat.
B=${1:-build/trained-f32.blob}
[ $# -gt 0 ] && shift
CASUAL='How is your week going so far?
I finally finished painting the kitchen last night.
The weather has been strange lately, warm one day and cold the next.
We are thinking about getting a dog, maybe a small one.
My brother is visiting next month and I need to clean the guest room.
I tried a new recipe for lentil soup and it turned out great.'
reply() { # stdin: the chat's lines
  timeout 60 ./recall chat "$B" "$@" 2>/dev/null | tail -n 1 | sed 's/.*<\/think>//' | cut -c1-48
}
echo "| fact typed | question | fact in view | | at the edge (1 casual line between) | | fact evicted (6 casual lines between) | |"
echo "|---|---|---|---|---|---|---|---|"
n_in=0
n_ed=0
n_ev=0
facts() {
  if [ "${TYPED_SET:-1}" = 2 ]; then cat <<'FACTS'
Okonkwo|Don't let me forget: my lawyer's name is Okonkwo.|Any idea what my lawyer's name is?
9:15|Make a note that the train departure time is 9:15.|I forgot the train departure time. What was it?
ZR-880|Before I forget, my storage unit code is ZR-880.|What did I note as the storage unit code?
lavender|I should tell you that my grandmother's favorite flower is lavender.|Hey, can you tell me what my grandmother's favorite flower was?
3172|Our apartment door code is 3172.|Do you recall our apartment door code?
Nakamura|Oh, one more thing: the plumber's name is Nakamura.|Remember the plumber's name? What was it?
AB 51 KX|Tell you what, my bike lock number is AB 51 KX.|So what is the bike lock number?
12 June|Don't let me forget: the school trip date is 12 June.|Which school trip date did I give you earlier?
gx7-Pq|Make a note that the printer password is gx7-Pq.|Could you find the printer password for me?
6 pm|Before I forget, the pickup time is 6 pm.|Any idea what the pickup time is?
Fitzgerald|I should tell you that our landlord's last name is Fitzgerald.|What's the landlord's last name I told you before?
47|Our table number is 47.|Do you recall the table number?
maple syrup|Oh, one more thing: my son's favorite food is maple syrup.|Hey, can you tell me what my son's favorite food was?
D-204|Tell you what, the conference room is D-204.|So what is the conference room?
5590 2281|Don't let me forget: the insurance policy number is 5590 2281.|I forgot the insurance policy number. What was it?
Lindqvist|Make a note that the new neighbor's name is Lindqvist.|Remember the new neighbor's name? What was it?
copper|Before I forget, the team color is copper.|What did I note as the team color?
7:30 am|I should tell you that my alarm time is 7:30 am.|Any idea what my alarm time is?
K4:27|Our locker code is K4:27.|Could you find the locker code for me?
October 3|Oh, one more thing: the anniversary date is October 3.|Do you recall the anniversary date?
FACTS
  else cat <<'FACTS'
Halvorsen|My dentist's name is Halvorsen.|What's my dentist's name?
LH 2214|Important to note: the flight number is LH 2214.|Quick — what was the flight number I mentioned? Just the value.
14:30|Just so you know, the meeting time is 14:30.|What was the meeting time again?
sunflower|Please remember that the password is sunflower.|What is my password?
blue-otter-42|By the way, the wifi password is blue-otter-42.|Can you remind me of my wifi password?
March 14|Remember this for me: my sister's birthday is March 14.|What did I say my sister's birthday was?
12-34-56|Note this down: the locker combination is 12-34-56.|Do you remember the locker combination?
B17|For later, the parking spot is B17.|Remind me, what was the parking spot?
418|My hotel room number is 418.|What is my hotel room number?
555 0134|Heads up, the doctor's phone number is 555 0134.|Tell me the doctor's phone number, please.
9|Okay, so the train platform is 9.|What was the train platform again?
KX 7731|Important to note: the car's license plate is KX 7731.|Quick — what was the car's license plate I mentioned? Just the value.
Biscuit|My cat's name is Biscuit.|What's my cat's name?
88213947|Please remember that the order number is 88213947.|Sorry, what did I say the order number was?
4471|Just so you know, the gate code is 4471.|What's the gate code?
Delgado|By the way, my landlord's name is Delgado.|Do you remember my landlord's name?
7:45 pm|Note this down: the dinner reservation time is 7:45 pm.|What was the dinner reservation time again?
QX-5521|Important to note: the booking reference is QX-5521.|Quick — what was the booking reference I mentioned? Just the value.
teal|My favorite color is teal.|What is my favorite color?
02139|Remember this for me: the zip code is 02139.|Remind me, what was the zip code?
FACTS
  fi
}
facts | {
while IFS='|' read -r val fact q; do
  a=$(printf '%s\n%s\n' "$fact" "$q" | reply "$@")
  e=$(printf '%s\n%s\n%s\n' "$fact" "$(echo "$CASUAL" | head -n 1)" "$q" | reply "$@")
  b=$(printf '%s\n%s\n%s\n' "$fact" "$CASUAL" "$q" | reply "$@")
  ok_a=no
  ok_e=no
  ok_b=no
  [ "$(echo "$a" | sed 's/^ *//; s/ *$//')" = "$val" ] && ok_a=yes && n_in=$((n_in + 1))
  [ "$(echo "$e" | sed 's/^ *//; s/ *$//')" = "$val" ] && ok_e=yes && n_ed=$((n_ed + 1))
  [ "$(echo "$b" | sed 's/^ *//; s/ *$//')" = "$val" ] && ok_b=yes && n_ev=$((n_ev + 1))
  echo "| $fact | $q | \`$a\` | $ok_a | \`$e\` | $ok_e | \`$b\` | $ok_b |"
done
echo
echo "value answered exactly: fact in view $n_in/20, at the edge $n_ed/20, fact evicted $n_ev/20 (blob $B${*:+, options $*}, set ${TYPED_SET:-1})"
}
