"""Book-SORT (Pink et al., 2024): build the dataset from books (`build`), load it (`data`), prompts, task and metrics."""
