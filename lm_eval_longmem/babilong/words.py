"""The bAbI vocabulary: the words of the twenty tasks' stories, questions and answers, in one place.

Three parts read these lists and nothing else of each other: the simulator writes stories with
them (`simulate.py`, `simulate_world.py`), the verifier reads stories back with its own regular
expressions built from them (`verify.py`), and the answer checks read model answers against the
tasks' label sets (`official_check.py`, `corrected/`). Only words live here; what a word
means in a story (where a direction leads, which side of a shape is which) stays in the module that uses it, so the verifier remains an independent
reading of the simulator's text.
"""

from __future__ import annotations

# --- people -----------------------------------------------------------------------------------

PEOPLE = ("John", "Mary", "Sandra", "Daniel")
"""qa1-qa4, qa6-qa9, qa11-qa13."""
GIVERS = ("Bill", "Fred", "Jeff", "Mary")
"""qa5: who gives what to whom."""
VISITORS = ("Bill", "Fred", "Julie", "Mary")
"""qa10, qa14."""
ANIMAL_NAMES = ("Emily", "Gertrude", "Jessica", "Winona")
"""qa15: the named animals (the questions write them in lower case)."""
PET_NAMES = ("Lily", "Bernhard", "Greg", "Julius", "Brian")
"""qa16."""
AGENTS = ("Jason", "Antoine", "Sumit", "Yann")
"""qa20 (the questions write them in lower case)."""

WIDE_NAMES = {
    "Alice": "she",
    "Oliver": "he",
    "Nina": "she",
    "Victor": "he",
    "Grace": "she",
    "Hugo": "he",
    "Leah": "she",
    "Omar": "he",
    "Rosa": "she",
    "Tomas": "he",
    "Irene": "she",
    "Felix": "he",
}
"""Extra people of the simulator's wide vocabulary, with their pronoun.

None of the wide words contains a label of any task or another word as a substring (the authors'
check finds labels by substring); a test checks this.
"""
PRONOUN = {"John": "he", "Daniel": "he", "Mary": "she", "Sandra": "she", **WIDE_NAMES}
"""The pronoun of everyone a coreference story (qa11, qa13) may name."""
SHE = frozenset(name for name, pronoun in PRONOUN.items() if pronoun == "she")

# --- places, things, verbs --------------------------------------------------------------------

ROOMS = ("bathroom", "bedroom", "garden", "hallway", "kitchen", "office")
PLACES = ("bedroom", "cinema", "kitchen", "office", "park", "school")
"""qa10, qa14."""
WIDE_ROOMS = ("attic", "cellar", "garage", "library", "pantry", "studio", "porch", "laundry")
WIDE_PLACES = ("museum", "library", "stadium", "market", "harbour", "bakery")
OBJECTS = ("apple", "football", "milk")
WIDE_OBJECTS = ("book", "key", "umbrella", "lamp", "scarf", "wallet")

MOVES = ("travelled to", "went to", "journeyed to", "moved to", "went back to")
TAKES = ("got", "took", "picked up", "grabbed")
DROPS = ("dropped", "left", "put down", "discarded")
GIVES = ("gave", "handed", "passed")
LINKERS = ("Then", "After that", "Afterwards", "Following that")
"""qa11, qa13: how a sentence about the same person starts."""
TIMES = ("yesterday", "this morning", "this afternoon", "this evening")
"""qa14, in the order of a day."""

COUNTS = ("none", "one", "two", "three")
"""qa7: the number of objects carried, as the labels write it."""

# --- animals, colours, shapes, containers, motives --------------------------------------------

ANIMALS = {"cat": "cats", "mouse": "mice", "sheep": "sheep", "wolf": "wolves"}
"""qa15: each kind of animal and its plural (the stories say "Mice are afraid of wolves.")."""
SPECIES = ("lion", "rhino", "frog", "swan")
"""qa16."""
COLOURS = ("gray", "green", "white", "yellow")
"""qa16."""

DIRECTIONS = {"north": "n", "south": "s", "east": "e", "west": "w"}
"""qa4, qa19: the compass words and the letters qa19's answers write them with."""
OPPOSITE = {"north": "south", "south": "north", "east": "west", "west": "east"}

SHAPES = ("red square", "triangle", "pink rectangle", "yellow square", "blue square", "red sphere")
"""qa17."""
POSITIONS = ("to the left of", "to the right of", "below", "above")
"""qa17: how one shape is placed against another."""
OPPOSITE_POSITION = {
    "to the left of": "to the right of",
    "to the right of": "to the left of",
    "below": "above",
    "above": "below",
}
CONTAINERS = ("box", "box of chocolates", "chocolate", "container", "chest", "suitcase")
"""qa18: the things whose sizes are compared."""

MOTIVES = {
    "thirsty": ("kitchen", "milk"),
    "hungry": ("kitchen", "apple"),
    "bored": ("garden", "football"),
    "tired": ("bedroom", "pajamas"),
}
"""qa20: each motive, the place it sends someone to and the thing they get there."""
