"""Synthetic short stories: the demo family's English, generated from a small grammar.

No machine has varied English fiction offline under a licence that allows training on
it, and the one English text every Python has (``pydoc``'s reference topics) taught the
demo target to loop on manual sentences. These stories are written here instead. A story
opens by naming its character, their trade and their place; then every sentence is put
together from parts (when, who, what they did to what, where, how), each part drawn at
random from a long list. Most words are free choices, as in real prose, where many next
words are plausible; in code, the next token is mostly forced.
"""

from __future__ import annotations

import random

NAMES = {
    "she": "Mara Ines Ada Lena Nora Ruth Elsa Tilde June Iris Vera Hana Clara Maud Edith "
           "Agnes Olive Greta Lucia Rosa Alma Dora Frida Helga Ilse Kira Lotte Mina Nell "
           "Pia".split(),
    "he": "Tomas Elias Hugo Felix Oskar Milo Jonah Arlo Pavel Silas Emil Bruno Otto Luca "
          "Anton Casper Leo Ivo Victor Abel Boris Cyril Dario Ezra Gus Henrik Jasper Karl "
          "Linus Nils".split(),
}
TRADES = ("baker fisherman clockmaker teacher ferryman shepherd potter weaver gardener "
          "beekeeper carpenter postman miller painter blacksmith bookseller sailor doctor "
          "farmer tailor mapmaker innkeeper glassblower stonemason keeper singer "
          "watchmaker printer cook hunter").split()
PLACES = ["a village by the sea", "a town at the edge of the forest", "a small island",
          "a house on the hill", "a city of narrow streets", "a farm in the valley",
          "a port where the ships came in", "a cottage near the river",
          "a mountain village", "a street by the harbour", "an old mill",
          "a town where it always rained", "a valley full of orchards",
          "a house at the end of the road", "a village under the cliffs",
          "a tower above the bay", "a hut in the marshes", "a camp in the desert"]
WHEN = ["One morning", "Late that evening", "In the spring", "That night",
        "Early in the autumn", "On a grey afternoon", "At the end of the summer",
        "The next day", "Just before dawn", "During the storm", "On Sunday",
        "In the middle of winter", "A week later", "Years ago", "Before supper",
        "At noon", "After the rain", "Long before that", "By the time the bells rang",
        "Once"]
ADJECTIVES = ("old small broken silver wooden heavy quiet strange red green blue white "
              "dark bright cold warm tiny wet narrow golden rusty empty secret torn "
              "yellow soft sharp round crooked forgotten hidden painted grey black "
              "careful curious sleepy proud gentle tired").split()
NOUNS = ("letter key box map coin photograph bird lantern book bottle ring stone page "
         "compass scarf watch seed door feather boat bell candle basket bridge window "
         "garden ladder rope knife mirror shell cup chair table blanket coat hat shoe "
         "apple loaf net wheel clock drum flute kettle bucket fence gate path cloud "
         "fox horse dog cat goat owl crow fish cart barrel").split()
VERBS = ("found lost carried opened closed painted mended hid buried sold bought "
         "watched followed cleaned broke lifted dropped kept wrapped counted filled "
         "emptied carved polished fed chased burned borrowed returned").split()
MOVES = ("walked ran sailed climbed wandered hurried drove rode swam crept "
         "waited slept sang listened laughed cried worked rested").split()
WHERE = ["in the garden", "by the river", "under the bridge", "on the shore",
         "at the market", "behind the house", "in the attic", "near the well",
         "across the field", "into the forest", "along the road", "down to the harbour",
         "up the hill", "past the church", "in the kitchen", "on the roof",
         "through the snow", "around the lake", "at the station", "beside the fire"]
HOW = ["slowly", "quickly", "quietly", "alone", "again", "carefully", "all day",
       "without a word", "for a long time", "at once", "with great care", "in secret",
       "twice", "before anyone woke", "until dark", "as if in a dream"]
SAYS = ["said", "whispered", "asked", "shouted", "called", "murmured", "wrote", "thought"]
ENDINGS = ["and from that day on, nothing was the same", "and nobody ever knew why",
           "and that was the end of it", "and at last {they} slept",
           "and {they} never spoke of it again", "and the whole town talked about it",
           "and {they} smiled for the first time in years", "and the answer was there"]
PEOPLE = ("the neighbour", "the old man", "a stranger", "the children", "the captain",
          "the mayor", "a girl from the town", "the priest", "the boy next door",
          "her sister", "his brother", "the doctor", "a traveller", "the widow")


def noun_phrase(rng: random.Random) -> str:
    """'the old key', 'a bird', 'her green scarf'..."""
    adjective = rng.choice(ADJECTIVES) + " " if rng.random() < 0.6 else ""
    noun = rng.choice(NOUNS)
    det = rng.choice(["the", "a", "an", "this", "that", "every", "one"])
    if det in ("a", "an"):
        det = "an" if (adjective or noun)[0] in "aeiou" else "a"
    return f"{det} {adjective}{noun}"


def sentence(rng: random.Random, name: str, they: str) -> str:
    """One sentence built from parts; about half open with a time phrase."""
    subject = rng.choice([name, they, they, rng.choice(PEOPLE)])
    kind = rng.random()
    if kind < 0.45:
        body = f"{subject} {rng.choice(VERBS)} {noun_phrase(rng)}"
    elif kind < 0.75:
        body = f"{subject} {rng.choice(MOVES)} {rng.choice(WHERE)}"
    elif kind < 0.9:
        return f'"There is {noun_phrase(rng)} {rng.choice(WHERE)}," {subject} {rng.choice(SAYS)}.'
    else:
        body = f"{noun_phrase(rng)} was {rng.choice(ADJECTIVES)}"
    if rng.random() < 0.5:
        body += f" {rng.choice(HOW)}"
    if rng.random() < 0.4:
        body = f"{rng.choice(WHEN)}, {body}"
    return body[0].upper() + body[1:] + "."


def story(rng: random.Random) -> str:
    """One story: who, what and where, two to four sentences, and how it ended."""
    pronoun = rng.choice(["she", "he"])
    name = rng.choice(NAMES[pronoun])
    opening = (f"{rng.choice(WHEN)}, in {rng.choice(PLACES)}, there lived a "
               f"{rng.choice(TRADES)} called {name}.")
    body = [sentence(rng, name, pronoun) for _ in range(rng.randint(2, 4))]
    ending = (f"In the end, {rng.choice([name, pronoun])} {rng.choice(VERBS)} "
              f"{noun_phrase(rng)}, {rng.choice(ENDINGS).format(they=pronoun)}.")
    return " ".join([opening, *body, ending])


def stories(count: int, seed: int) -> list[str]:
    """``count`` stories from a generator seeded by ``seed``: the same list on every
    machine and Python version (``random.Random`` with an int seed is stable)."""
    rng = random.Random(seed)
    return [story(rng) for _ in range(count)]
