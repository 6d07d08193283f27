"""bench/recall.py: the LoCoMo reader, the recall figures on it, and --model against the fake LLM."""

import asyncio
import json

from bench import recall
from bench.recall_data import generate, read_locomo
from tests.fakes.fake_llm import Reply

LOCOMO = [{
    "sample_id": "conv-1",
    "conversation": {
        "speaker_a": "Caroline", "speaker_b": "Melanie",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Caroline", "dia_id": "D1:1", "text": "Hey Mel! Any plans for the summer?"},
            {"speaker": "Melanie", "dia_id": "D1:2", "text": "Camping in the mountains with the kids!"},
            {"speaker": "Caroline", "dia_id": "D1:3", "text": "Look at this", "blip_caption": "a photo of a red tent"},
        ],
        "session_2_date_time": "10:00 am on 20 June, 2023",
        "session_2": [
            {"speaker": "Melanie", "dia_id": "D2:1", "text": "I started pottery classes, so relaxing."},
            {"speaker": "Caroline", "dia_id": "D2:2", "text": "Pottery sounds lovely."},
        ],
    },
    "qa": [
        {"question": "What are Melanie's plans for the summer?", "answer": "camping in the mountains",
         "evidence": ["D1:2"], "category": 1},
        {"question": "What did Caroline paint?", "adversarial_answer": "a sunset", "evidence": ["D1:1"], "category": 5},
        {"question": "What is Melanie's dog called?", "answer": "Max", "evidence": ["D9:9"], "category": 4},
    ],
}]


def write_locomo(tmp_path):
    path = tmp_path / "locomo_tiny.json"
    path.write_text(json.dumps(LOCOMO))
    return path


def test_locomo_reader_keeps_turns_dates_and_answerable_questions(tmp_path):
    """Turns get their session's date and photo caption; adversarial and unanchored questions are left out."""
    extra = {"question": "What does Melanie do to relax?", "answer": 2023, "evidence": ["D2:1; D2:2"], "category": 2}
    path = tmp_path / "locomo_extra.json"
    path.write_text(json.dumps([{**LOCOMO[0], "qa": [*LOCOMO[0]["qa"], extra]}]))
    (chat,) = read_locomo(path)
    assert [t.id for t in chat.turns] == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2"]
    assert chat.turns[2].text == "Look at this [shares a photo: a photo of a red tent]"
    assert chat.turns[3].ts - chat.turns[0].ts == (43 * 24 - 3) * 3600 - 56 * 60  # 8 May 13:56 -> 20 June 10:00
    assert [(q.question, q.answer, q.evidence) for q in chat.questions] == [
        ("What are Melanie's plans for the summer?", "camping in the mountains", ("D1:2",)),
        ("What does Melanie do to relax?", "2023", ("D2:1", "D2:2"))]  # several ids in one string, a number


def test_locomo_mode_reports_recall_for_both_searches(tmp_path, capsys):
    """--locomo FILE prints recall@1/5/10 for Tusk's search on files and in PostgreSQL, and the plain BM25
    baseline, on that file."""
    recall.main(["--locomo", str(write_locomo(tmp_path))])
    out = capsys.readouterr().out
    rows = {line.split()[0] + line.split()[1]: line.split()[2:] for line in out.splitlines()
            if line.startswith(("tusk search", "postgres search", "plain BM25"))}
    assert "LoCoMo locomo_tiny.json (1 conversations, 5 turns): 1 questions" in out
    assert rows["tusksearch"][:3] == ["100.0%", "100.0%", "100.0%"]  # Melanie's reply, found through its question
    assert rows["postgressearch"][:3] == ["100.0%", "100.0%", "100.0%"]
    assert "postgres - files, points:  R@1 +0.0  R@5 +0.0  R@10 +0.0" in out
    assert rows["plainBM25"][0] == "0.0%"  # the baseline ranks Caroline's question first


def test_generated_questions_do_not_reuse_the_statements():
    """Generated questions never contain their answer turn's text, and every answer turn exists."""
    chats = generate(3)
    for chat in chats:
        turns = {t.id: t.text for t in chat.turns}
        for q in chat.questions:
            assert all(e in turns for e in q.evidence)
            assert q.answer in turns[q.evidence[0]] and q.answer not in q.question
    assert sum(len(c.turns) for c in chats) > 600 and sum(len(c.questions) for c in chats) > 30


async def test_model_mode_answers_from_memory_and_judges(tmp_path, fake_llm):
    """--model sends the question with MEMORY.md and search results, then asks the same model to judge."""
    def responder(body):
        messages = body["messages"]
        if messages[0]["role"] == "system":  # answering: only what the search put in front of it
            return Reply(text="Camping in the mountains" if "Camping in the mountains" in messages[0]["content"]
                         else "unknown")
        return Reply(text="CORRECT" if "Given answer: Camping" in messages[0]["content"] else "WRONG")

    fake_llm.responder = responder
    argv = ["--locomo", str(write_locomo(tmp_path)), "--model", "openai/fake-model",
            "--api-base", fake_llm.base_url, "--api-key", "sk-test"]
    lines = []
    accuracy = await recall.answer_accuracy(read_locomo(write_locomo(tmp_path)), tmp_path / "home",
                                            recall.HistorySearch(), "openai/fake-model", fake_llm.base_url,
                                            "sk-test", None, lines.append)
    assert accuracy == 1.0 and lines[-1].endswith("1/1 = 100.0%")
    answer, judge = fake_llm.requests
    assert "Melanie: Camping in the mountains" in answer["messages"][0]["content"]
    assert "Gold answer: camping in the mountains" in judge["messages"][0]["content"]
    await asyncio.to_thread(recall.main, argv)  # the command line runs the same, in its own event loop
    assert len(fake_llm.requests) == 4
