"""The conversations bench/recall.py searches: generated ones, or the public LoCoMo file.

A `Chat` is a list of turns (speaker, text, timestamp, turn id) and the questions about it,
each with the ids of the turns that hold its answer.

The generator writes multi-session conversations between named friends; the older half of
each is also summarised into HISTORY.md entries (one per session, in a third wording), as
consolidation would leave it, so entries and messages compete. Each fact is told
in one of several statement wordings, most often as the *reply* to a friend's question
("Any plans for the summer?" / "Yes! Hiking the Inca trail in Peru"), and is asked about
later with wordings from a separate set of question templates that never reuse the
statement templates (paraphrases: "Where is Ana travelling?" for "flying to Lisbon").
Friends share topics (both have a trip), so the person asked about matters; some people
have the same topic twice in different months and are asked with a date; some questions
carry a misspelling. Small talk fills the sessions and reuses the topics' common words.

`read_locomo(path)` reads the public LoCoMo format (locomo10.json): a list of samples, each
with `conversation` (`speaker_a`, `speaker_b`, `session_N` lists of turns with `speaker`,
`dia_id`, `text`, optional `blip_caption`; `session_N_date_time` such as "1:56 pm on 8 May,
2023") and `qa` (`question`, `answer`, `evidence` dia_ids, `category`; category 5, the
adversarial questions with no answer in the conversation, is left out).
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Turn:
    speaker: str
    text: str
    ts: float
    id: str


@dataclass(frozen=True, slots=True)
class Ask:
    question: str
    answer: str
    evidence: tuple[str, ...]
    category: str = ""


@dataclass(frozen=True, slots=True)
class Entry:
    """A HISTORY.md entry: a summary of turns that are also in the session (as after consolidation)."""

    ts: float
    text: str
    covers: tuple[str, ...]  # the ids of the answer turns it states


@dataclass(slots=True)
class Chat:
    name: str
    turns: list[Turn] = field(default_factory=list)
    questions: list[Ask] = field(default_factory=list)
    history: list[Entry] = field(default_factory=list)


# topic: values (answer, words that show in the statement), prompts a friend asks, statements (the
# reply holding the answer), questions asked later (other words than the statements)
TOPICS = {
    "trip": {
        "summary": "{p} told {f} about a coming trip to {v}.",
        "values": ["Lisbon", "Kyoto", "Reykjavik", "Marrakesh", "Vancouver", "Crete", "Patagonia", "Tallinn"],
        "prompts": ["Any plans for the holidays, {p}?", "So {p}, what are you up to next month?",
                    "Are you going anywhere nice soon?"],
        "statements": ["Yes! We booked flights to {v}, two weeks, I can't wait.",
                       "We're off to {v} with my cousins, the tickets are sorted.",
                       "I finally get to see {v}, we leave on the 3rd."],
        "questions": ["Where is {p} travelling for the holidays?", "Which destination did {p} book flights for?",
                      "What place was {p} going to visit {when}?", "Where was {p} heading on the trip?"],
    },
    "pet": {
        "summary": "{p} has a new pet at home, a {v}.",
        "values": ["beagle puppy", "grey kitten", "green parrot", "rescue greyhound", "pair of rabbits",
                   "corn snake"],
        "prompts": ["Anything new at home, {p}?", "How's the flat, {p}? Still quiet?"],
        "statements": ["Not quiet at all, we adopted a {v} on Saturday!", "We brought home a {v}, total chaos.",
                       "Meet the new family member: a {v}."],
        "questions": ["What animal did {p} adopt?", "Which pet joined {p}'s family?",
                      "What kind of animal lives at {p}'s home now?"],
    },
    "hobby": {
        "summary": "{p} now does {v} regularly.",
        "values": ["pottery", "salsa dancing", "rock climbing", "watercolour painting", "chess", "sourdough baking"],
        "prompts": ["What do you do in the evenings these days, {p}?", "Found anything fun to do lately?"],
        "statements": ["I signed up for {v} classes at the community centre.", "I'm obsessed with {v} right now.",
                       "Twice a week I do {v}, it clears my head."],
        "questions": ["What activity has {p} taken up in the evenings?", "Which classes does {p} go to?",
                      "How does {p} have fun lately?"],
    },
    "job": {
        "summary": "{p} accepted a job offer: {v}.",
        "values": ["nurse at the children's hospital", "data analyst at a bank", "teacher at the primary school",
                   "chef in a hotel kitchen", "park ranger", "translator for a publisher"],
        "prompts": ["How did the interview go, {p}?", "Any news on the work front?"],
        "statements": ["They offered me the post! I start as {v} next month.", "I got it, I'll be a {v}.",
                       "Signed the contract today: {v}."],
        "questions": ["What post was {p} offered?", "What is {p}'s new role at work?",
                      "Which job did {p} sign a contract for {when}?"],
    },
    "study": {
        "summary": "{p} is going back to studies: {v}.",
        "values": ["marine biology", "architecture", "nursing", "computer science", "art history", "economics"],
        "prompts": ["Are you still thinking about going back to school, {p}?", "What about university, {p}?"],
        "statements": ["Yes, I enrolled in a {v} degree, lectures start soon.",
                       "I applied for {v} and they accepted me!", "Evening courses in {v}, three years."],
        "questions": ["What is {p} studying at university?", "Which subject does {p}'s education focus on?",
                      "What degree did {p} enroll in?"],
    },
    "instrument": {
        "summary": "{p} now plays the {v}.",
        "values": ["cello", "ukulele", "drums", "saxophone", "harp", "piano"],
        "prompts": ["Was that music I heard on your call, {p}?", "Still doing the music thing, {p}?"],
        "statements": ["That was me practising the {v}, lessons every Tuesday.", "Yes, I bought a second-hand {v}.",
                       "I'm learning the {v}, badly so far."],
        "questions": ["Which instrument does {p} practise?", "What music lessons does {p} take?"],
    },
    "race": {
        "summary": "{p} completed the {v}.",
        "values": ["half marathon in Berlin", "10k charity run", "triathlon by the lake", "cycling sportive",
                   "trail ultra in the Alps"],
        "prompts": ["You look tired, {p}, long weekend?", "How was Sunday, {p}?"],
        "statements": ["I did the {v}, my legs are gone.", "Finished the {v} in under my target time!"],
        "questions": ["What sporting event did {p} finish?", "Which race did {p} take part in {when}?"],
    },
    "move": {
        "summary": "{p} is moving house, to {v}.",
        "values": ["Leeds", "Porto", "Montreal", "Bristol", "Utrecht", "Gdansk"],
        "prompts": ["Is the lease ending soon, {p}?", "Any news about the flat hunt?"],
        "statements": ["We found a place in {v}, we're moving in March.", "Packing boxes, we're off to {v}."],
        "questions": ["To which city is {p} moving?", "Where is {p}'s new flat?"],
    },
}
PEOPLE = ["Ana", "Bob", "Chloe", "Dev", "Emma", "Farid", "Grace", "Hugo", "Ines", "Jonas", "Kemi", "Liam", "Maya",
          "Noor", "Oscar", "Priya", "Quinn", "Rosa", "Sami", "Tara"]
SMALL_TALK = ["Morning! How was the weekend?", "Busy week at work, the usual.", "Did you see the game last night?",
              "It rained all day here, so I stayed home.", "Haha, same here.", "I need a holiday soon honestly.",
              "Let's grab dinner next week?", "Sounds good to me.", "My plans fell through again, typical.",
              "The new cafe by the station is nice.", "Did you finish that book you were reading?",
              "Not yet, too tired in the evenings.", "Work has been a lot, any tips for sleeping better?",
              "Try no screens after ten.", "I'm thinking about a new hobby, no idea which.",
              "My cousin is visiting next month.", "How's your family doing?", "All good, thanks for asking!",
              "The flat is freezing, the heating broke.", "Call you later, got a meeting.",
              "What are you having for dinner?", "Pasta again, classic.", "Travel is so expensive this year.",
              "I want to learn something new but never have time.", "Music recommendations? I'm bored."]
WHEN = "in {month} {year}"


def typo(word: str, rng: random.Random) -> str:
    i = rng.randrange(1, len(word) - 1)
    return word[:i] + word[i + 1:] if rng.random() < 0.5 else word[:i] + word[i + 1] + word[i] + word[i + 2:]


def misspell(question: str, rng: random.Random) -> str:
    words = [w for w in re.findall(r"[A-Za-z]{6,}", question) if not w[0].isupper()]
    return question.replace(w := rng.choice(words), typo(w, rng), 1) if words else question


def _fact_turns(rng, topic, person, friend, value, ts, ids) -> tuple[list[Turn], str]:
    """The turns stating one fact; returns them and the id of the turn that holds the answer."""
    spec = TOPICS[topic]
    statement = rng.choice(spec["statements"]).format(v=value)
    turns = []
    if rng.random() < 0.75:  # the usual case: the answer is a reply to a friend's question
        turns.append(Turn(friend, rng.choice(spec["prompts"]).format(p=person), ts, next(ids)))
    answer = Turn(person, statement, ts + 30 * (len(turns) + 1), next(ids))
    turns.append(answer)
    turns.append(Turn(friend, rng.choice(["Wow, amazing!", "No way, tell me more!", "That's great news.",
                                          "Good for you!", "Ha, I did not expect that."]), answer.ts + 30, next(ids)))
    return turns, answer.id


def generate(n_chats: int = 20, sessions: int = 12, seed: int = 17, history: bool = True) -> list[Chat]:
    """`n_chats` conversations of `sessions` dated sessions each (a few thousand turns in all), the
    older half also summarised in HISTORY.md entries unless `history` is false."""
    rng = random.Random(seed)
    chats = []
    for c in range(n_chats):
        people = rng.sample(PEOPLE, 3)
        chat = Chat(f"gen-{c}")
        counter = iter(range(1, 10**6))
        ids = (f"D{c}:{n}" for n in counter)
        facts = []  # (session, topic, person, friend, value)
        for person in people:
            for topic in rng.sample(sorted(TOPICS), 4):
                times = 2 if rng.random() < 0.35 else 1  # the same topic twice, months apart: asked with a date
                values = rng.sample(TOPICS[topic]["values"], times)
                for k, value in enumerate(values):
                    session = rng.randrange(k * sessions // 2, (k + 1) * sessions // 2) if times == 2 \
                        else rng.randrange(sessions)
                    facts.append((session, topic, person, rng.choice([p for p in people if p != person]), value))
        day = datetime(2023, 1, 5, 18, tzinfo=timezone.utc)
        stated = []  # (topic, person, value, date, answer turn id, how many times the topic is told)
        for s in range(sessions):
            day += timedelta(days=rng.randint(20, 40))
            ts = day.timestamp()
            todays = [f for f in facts if f[0] == s]
            slots = sorted(rng.sample(range(18), min(len(todays), 18)))
            todo = dict(zip(slots, todays))
            summary, covers = [], []
            for slot in range(18):
                if slot in todo:
                    _, topic, person, friend, value = todo[slot]
                    turns, answer = _fact_turns(rng, topic, person, friend, value, ts, ids)
                    chat.turns += turns
                    stated.append((topic, person, value, day, answer))
                    summary.append(TOPICS[topic]["summary"].format(p=person, f=friend, v=value))
                    covers.append(answer)
                else:
                    chat.turns.append(Turn(rng.choice(people), rng.choice(SMALL_TALK), ts, next(ids)))
                ts = chat.turns[-1].ts + 60
            if history and s < sessions // 2:  # the older half was consolidated: a dated summary per session
                text = " ".join(summary + ["The rest was small talk about work, plans and the weather."])
                chat.history.append(Entry(ts + 3600, text, tuple(covers)))
        for topic, person, value, day, answer in stated:
            twice = sum(1 for t, p, *_ in stated if (t, p) == (topic, person)) > 1
            templates = TOPICS[topic]["questions"]
            dated = [q for q in templates if "{when}" in q]
            template = rng.choice(dated or templates) if twice else rng.choice(templates)
            when = WHEN.format(month=day.strftime("%B"), year=day.year) if "{when}" in template or twice else ""
            question = template.format(p=person, when=when).replace("  ", " ").replace(" ?", "?")
            if twice and "{when}" not in template:
                question = question.rstrip("?") + f" {when}?"
            if rng.random() < 0.2:
                question = misspell(question, rng)
            chat.questions.append(Ask(question, value, (answer,), "dated" if twice else topic))
        chats.append(chat)
    return chats


def _session_time(text: str) -> datetime:
    """"1:56 pm on 8 May, 2023" (LoCoMo's session_N_date_time) as a UTC datetime."""
    return datetime.strptime(" ".join(text.split()), "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)


def read_locomo(path: Path) -> list[Chat]:
    """The LoCoMo file's conversations and their answerable questions (see the module doc)."""
    samples = json.loads(Path(path).read_text(encoding="utf-8"))
    chats = []
    for i, sample in enumerate(samples):
        conv = sample["conversation"]
        chat = Chat(str(sample.get("sample_id", f"locomo-{i}")))
        numbers = sorted(int(m[1]) for key in conv if (m := re.fullmatch(r"session_(\d+)", key)))
        for n in numbers:
            start = _session_time(conv[f"session_{n}_date_time"])
            for k, turn in enumerate(conv[f"session_{n}"]):
                text = turn["text"]
                if turn.get("blip_caption"):
                    text += f" [shares a photo: {turn['blip_caption']}]"
                chat.turns.append(Turn(turn["speaker"], text, (start + timedelta(seconds=30 * k)).timestamp(),
                                       turn["dia_id"]))
        known = {t.id for t in chat.turns}
        for qa in sample.get("qa", []):
            ids = [i for e in qa.get("evidence", []) for i in re.split(r"[;,\s]+", str(e)) if i]  # "D8:6; D9:17"
            evidence = tuple(i for i in ids if i in known)
            if str(qa.get("category")) == "5" or "answer" not in qa or not evidence:
                continue
            chat.questions.append(Ask(qa["question"], str(qa["answer"]), evidence, str(qa.get("category", ""))))
        chats.append(chat)
    return chats
