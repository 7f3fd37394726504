"""The conditions a model is evaluated under: one vocabulary for every evaluation.

The papers compare a model against itself under other conditions: the text in its context (every
evaluation), no text at all (a memory-less control), only the pieces a retriever picked from it
(retrieval-augmented generation), or the text learnt into the weights (a fine-tuned memory). Each
run of a task of ours records which one it ran under (`configs.<task>.longmem.condition`,
`LongmemTask.result_facts`); readers take it from there (`readers.results.condition_of`) and the
report lays a model's conditions side by side.
"""

from __future__ import annotations

IN_CONTEXT = "in-context"
MEMORYLESS = "memory-less"
RETRIEVAL = "retrieval"
FINE_TUNED = "fine-tuned"

CONDITIONS: dict[str, str] = {
    IN_CONTEXT: "the text is in the model's context",
    MEMORYLESS: "the text is neither in the context nor in the weights (a control)",
    RETRIEVAL: "only the pieces a retriever picked from the text are in the context",
    FINE_TUNED: "the text is in the weights (fine-tuned on it), not in the context",
}
"""Every condition, in the order the report lays them side by side, with what it means."""
