"""Whether the judge picks an answering sentence out of a whole chat.

For each question of a chat file (batch 9's format, BRIEF.md), every sentence of
the chat is put to the support task; the one with the highest probability of
`answers` (a wh-question) or of `yes` + `no` (a yes/no question) is the pick. It
is right when the writer marked it (its sentence overlaps a marked quote), and for
a yes/no question also right in its label. This is how the answerer meets the
judge: a search returns sentences on the question's topic, and one must be chosen.

    python training/judge/batch9/select_eval.py MODEL_DIR|shipped [--all] FILE.json...

Without ``--all`` only the development chats are read (those derive.py keeps out
of training: crc32 of the chat id, modulo 5, is 0); ``--all`` reads every chat (a
set written apart, such as training/fresh/chats-fresh9.json).
"""

import json
import sys
import zlib
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[2] / "src"))
sys.path.insert(0, str(HERE))
from derive import SENTENCE_BREAK, overlap  # noqa: E402

from archivist.judge.trained import TrainedJudge  # noqa: E402


def main(argv: list[str]) -> None:
    model, *rest = argv
    every = "--all" in rest
    files = [a for a in rest if a != "--all"]
    judge = TrainedJudge() if model == "shipped" else TrainedJudge(Path(model))
    right = {"wh": [0, 0], "yes_no": [0, 0], "yes_no_label": [0, 0]}
    for f in files:
        area = Path(f).stem
        for chat in json.load(open(f, encoding="utf-8"))["chats"]:
            if not every and zlib.crc32(f"{area[:4]}-{chat['id']}".encode()) % 5 != 0:
                continue
            sentences = [
                (m, s.strip())
                for m in chat["messages"]
                for s in SENTENCE_BREAK.split(m["text"])
                if s.strip()
            ]
            for q in chat["questions"]:
                p = judge.probabilities(
                    "support",
                    [("support. " + q["q"], f"{m['speaker']} said: {s}") for m, s in sentences],
                )
                score = p[:, 2] if q["form"] == "wh" else p[:, 0] + p[:, 1]
                i = int(score.argmax())
                m, s = sentences[i]
                hit = [k for k in q["marks"] if k["msg"] == m["id"] and overlap(s, k["quote"]) > 0]
                right[q["form"]][0] += bool(hit)
                right[q["form"]][1] += 1
                if q["form"] == "yes_no":
                    label = "yes" if p[i, 0] > p[i, 1] else "no"
                    right["yes_no_label"][0] += bool(hit) and hit[0]["label"] == label
                    right["yes_no_label"][1] += 1
    print(model, {k: f"{a}/{n} ({a / max(n, 1):.3f})" for k, (a, n) in right.items()})


if __name__ == "__main__":
    main(sys.argv[1:])
