"""Results files as our tasks write them, with round numbers: for the report's tests (`tests/report/`) and each
evaluation's section tests (`tests/<evaluation>/rim/test_section.py`)."""

from __future__ import annotations

import json

from lm_eval_longmem.readers.results import load_runs
from lm_eval_longmem.report.blocks import FigureBlock

LENGTHS = (64, 128, 256, 512, 1024)


def copy_curve(fine_until: int, coarse_until: int) -> dict[int, tuple[float, float]]:
    """Per length (copy, lm): copy perfect up to `fine_until`, above LM up to `coarse_until`, equal after."""
    return {L: (1.0 if L <= fine_until else 0.6 if L <= coarse_until else 0.3, 0.3) for L in LENGTHS}


def forgetting_curve_metrics(curve, fine, coarse) -> dict:
    row = {"alias": "forgetting_curve"}
    for L, (c, m) in curve.items():
        row |= {
            f"copy_acc@{L},none": c,
            f"copy_acc@{L}_stderr,none": 0.0,
            f"lm_acc@{L},none": m,
            f"lm_acc@{L}_stderr,none": 0.0,
        }
    row |= {
        "fine_memory_length,none": fine, "fine_memory_censored,none": fine == LENGTHS[-1],
        "fine_memory_length_low,none": fine // 2, "fine_memory_length_high,none": fine,
        "coarse_memory_length,none": coarse, "coarse_memory_censored,none": coarse == LENGTHS[-1],
        "coarse_memory_length_low,none": coarse // 2, "coarse_memory_length_high,none": coarse,
        "claimed_length,none": 8192, "skipped_lengths,none": "none", "skipped,none": 0,
    }  # fmt: skip
    return row


def booksort_metrics(acc_250: float, acc_500: float) -> dict:
    row = {
        "alias": "booksort_in_context",
        "acc,none": (acc_250 + acc_500) / 2,
        "acc_ci_low,none": 0.3,
        "acc_ci_high,none": 0.8,
    }
    for cell, value in (
        ("LE250", acc_250),
        ("LE500", acc_500),
        ("bin0", 0.9),
        ("bin1", 0.7),
        ("bin2", 0.5),
        ("bin3", 0.4),
    ):
        row |= {f"acc@{cell},none": value, f"acc@{cell}_ci_low,none": value - 0.1, f"acc@{cell}_ci_high,none": min(1.0, value + 0.1),
                f"acc@{cell}_p_above_chance,none": 0.01 if value > 0.8 else 0.5}  # fmt: skip
    return row


def babilong_metrics(scale: float) -> dict:
    """The one-task BABILong results (the shared-core contract): qa1-qa3 at 0k, 1k, 4k."""
    row = {"alias": "babilong", "skipped,none": 3, "skip_reasons,none": {"qa3_4k": {"longer than the window": 3}}}
    accs = {"qa1": (1.0, 0.9, 0.6), "qa2": (0.9, 0.5, 0.2), "qa3": (0.5, 0.3, 0.1)}
    for qa, values in accs.items():
        for length, value in zip(("0k", "1k", "4k"), values):
            row[f"acc@{qa}_{length},none"] = value * scale
            row[f"acc_corrected@{qa}_{length},none"] = min(1.0, value * scale + 0.05)
    for j, length in enumerate(("0k", "1k", "4k")):
        mean = sum(v[j] for v in accs.values()) / 3 * scale
        row |= {f"acc@{length},none": mean, f"acc@{length}_ci_low,none": mean - 0.1, f"acc@{length}_ci_high,none": mean + 0.1,
                f"acc_corrected@{length},none": mean + 0.05}  # fmt: skip
    row |= {"acc,none": 0.55 * scale, "acc_ci_low,none": 0.4, "acc_ci_high,none": 0.7, "acc_corrected,none": 0.6 * scale,
            "effective_context@qa1,none": "1k" if scale == 1 else "0k", "effective_context@qa2,none": "0k",
            "effective_context@qa3,none": "none"}  # fmt: skip
    return row


def write_run(folder, model, *, fine, coarse, scale=1.0, extra=None):
    folder.mkdir(parents=True)
    data = {
        "results": {
            "forgetting_curve": forgetting_curve_metrics(copy_curve(fine, coarse), fine, coarse),
            "booksort": {"alias": "booksort", "acc,none": 0.6},
            "booksort_in_context": booksort_metrics(0.9 * scale, 0.6 * scale),
            "babilong": babilong_metrics(scale),
            **(extra or {}),
        },
        "group_subtasks": {"booksort": ["booksort_in_context"]},
        "configs": {
            "babilong": {
                "longmem": {
                    "docs_per_cell": {f"{qa}_{n}": 20 for qa in ("qa1", "qa2", "qa3") for n in (0, 1024, 4096)}
                    | {"qa3_4096": 17}
                }
            }
        },  # fmt: skip (3 of qa3 at 4k skipped)
        "higher_is_better": {"hellaswag": {"acc": True, "acc_norm": True}},
        "n-samples": {"booksort_in_context": {"original": 48, "effective": 48}},
        "config": {"model": "hf", "model_args": f"pretrained=/models/{model},dtype=float32"},
        "model_name": f"/models/{model}",
    }
    path = folder / "results_2026-01-01T00-00-00.000001.json"
    path.write_text(json.dumps(data))
    return path


def blocks(report, kind, section=None):
    return [b for s in report.sections if section in (None, s.title) for b in s.blocks if isinstance(b, kind)]


def figure(report, name):
    return next(b.figure for b in blocks(report, FigureBlock) if b.name == name)


def with_answer_bias(path, share, per_length=(1.0, 1.0)):
    """Add Book-SORT `pct_A` metrics to a written run."""
    data = json.loads(path.read_text())
    row = data["results"]["booksort_in_context"]
    row |= {
        "pct_A,none": share,
        "pct_A_ci_low,none": max(0.0, share - 0.1),
        "pct_A_ci_high,none": min(1.0, share + 0.1),
    }
    row |= {f"pct_A@{cell},none": value for cell, value in zip(("LE250", "LE500"), per_length)}
    path.write_text(json.dumps(data))
    return path


def with_sources(path, **sources):
    data = json.loads(path.read_text())
    metadata = {"forgetting_curve_corpus": "/data/pg19", "forgetting_curve_samples": 10, **sources}
    data["configs"] = {"forgetting_curve": {"metadata": metadata}}
    path.write_text(json.dumps(data))
    return path


def two_runs(tmp_path):
    """Two models' runs of every evaluation; the first beside a harness task (`hellaswag`) and the harness's own
    `babilong_qa1`, which is not ours."""
    hellaswag = {
        "hellaswag": {"alias": "hellaswag", "acc,none": 0.41, "acc_stderr,none": 0.01, "acc_norm,none": 0.52},
        "babilong_qa1": {"alias": "babilong_qa1", "acc,none": 0.3, "acc_stderr,none": 0.02},  # the harness's, not ours
    }
    a = write_run(tmp_path / "a", "small-model", fine=128, coarse=512, extra=hellaswag)
    b = write_run(tmp_path / "b", "big-model", fine=512, coarse=1024, scale=0.8)
    return load_runs([a, b])
