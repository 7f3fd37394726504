"""Book-SORT (Pink et al., 2024): build the dataset from books (`build`), load it (`data`), prompts, task, its
scores (`scores`), the fine-tuned memory condition (`finetune`, `instructions`); its reader, report section,
figures, commands, planner and demo part are in its rim (`rim/`, registered as `rim.EVALUATION`)."""
