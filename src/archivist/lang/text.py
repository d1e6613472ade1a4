"""Text normalisation for every ranker, the answerer and the heuristics, in one place.

The ground floor of the package (standard library only, beside model and
errors), so the stores, the read and write paths and the proxy share one
tokeniser, one stopword list and one way to fold names.

    query_terms, fts_query  the terms BM25 ranks on, and the FTS5 MATCH
                            expression that quotes every one of them
    words, stem             raw word tokens and the light prefix stem the
                            answerer matches questions and evidence with
    match_words, singular   words in their phrase-matching form (entity
                            names, dossier keywords: "dogs" ~ "dog")
    name_words, person_key  how people's names are folded for matching
    normalised              the key under which two statements are the same
    content_words           the words of a text that may name a topic

There is one stopword list, ``STOPWORDS``. ``TOPIC_STOPWORDS`` derives from it
for the two uses that look for what a text is about rather than for what a
question asks (episode keywords, the proxy's drift measure).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

# Function words of conversational English: no retrieval signal in a question
# ("what", "did", "the"), no content in an answer. Contractions are listed with
# their apostrophe; the fragments (don, didn, ll, ve...) are what tokenisers that
# split at apostrophes leave. Left out: "may", also a month, and "kind", "type",
# "sort" ("a kind person", "blood type"), which measured better kept in questions
# (LoCoMo recall@10, single-hop) and in answers (QA F1).
STOPWORDS = frozenset(
    """a about above after again against all also am an and any anything are as at be
    because been before being below between both but by can could did do does doing down
    during each ever few for from further get go going got had has have having he her
    here hers herself hey hi him himself his how i if in into is it its itself just like
    likely lot many me might mine more most much must my myself no nor not now of off oh
    on once one ones only or other our ours ourselves out over own pretty really same
    shall she should since so some something still such than thank thanks that the their
    theirs them themselves then there these they thing things this those through to too
    under until up us very was we well went were what when where which while who whom
    whose why will with would wow yeah yes yet you your yours yourself yourselves
    i'm i've i'd i'll you're you've you'd you'll he's she's it's we're we've we'd we'll
    they're they've they'd they'll that's what's there's let's don't doesn't didn't
    isn't aren't wasn't weren't won't can't couldn't wouldn't shouldn't haven't hasn't
    hadn't
    s t d m o y ll ve re don didn doesn isn wasn weren won""".split()
)

# Month and weekday names (and their short forms) and the relative days: when,
# never what or who.
CALENDAR_WORDS = frozenset(
    """monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu thur
    thurs fri sat sun january february march april may june july august september october
    november december jan feb mar apr jun jul aug sep sept oct nov dec yesterday today
    tonight tomorrow""".split()
)

# Words chat is full of that say how someone feels or talks, not what about
# ("sounds great", "so happy to hear", "what kind of"). Real words a question may
# need, so they are no stopwords for search; they only never make a topic.
FILLER_WORDS = frozenset(
    """able although always amazing anyone around away awesome back best better chat cool
    day different done easy enough even every everyone everything exciting feel feeling
    felt found fun getting given glad gonna good great happy hard hear important
    inspiring keep keeping kind kinda know last lately let little look looking looks
    lots love loved made make making mean means month need never new next nice real
    recently said see seems share sharing someone sort sound sounds special stuff super
    sure sweet take taking talk tell think thinking though time told tough true try type
    wanna want way week whole without wonderful year years""".split()
)

# Words that never name what a text is about: the stopwords, the filler of chat and
# the calendar. For episode keywords and the proxy's drift measure, which look for
# a text's topics; search keeps the filler words (a question may ask about "love").
TOPIC_STOPWORDS = STOPWORDS | FILLER_WORDS | CALENDAR_WORDS

_TERM = re.compile(r"[^\W_]+(?:'[^\W_]+)?", re.UNICODE)
_WORD = re.compile(r"[\w'’-]+")
_LETTERS = re.compile(r"[^\W\d_]{4,}")
_STEM_SUFFIXES = ("ing", "ed", "es", "s", "ly", "e")
# Irregular past forms, to their verb: "When did Raj sell his car?" is answered by "Sold
# the Golf last weekend", "When did they break up?" by "We broke up over Christmas".
_IRREGULAR = {
    past: verb
    for verb, forms in (
        ("sell", "sold"),
        ("buy", "bought"),
        ("break", "broke broken"),
        ("leave", "left"),
        ("go", "went gone"),
        ("eat", "ate eaten"),
        ("run", "ran"),
        ("meet", "met"),
        ("begin", "began begun"),
        ("get", "got gotten"),
        ("give", "gave given"),
        ("take", "took taken"),
        ("make", "made"),
        ("find", "found"),
        ("feel", "felt"),
        ("keep", "kept"),
        ("lose", "lost"),
        ("pay", "paid"),
        ("see", "saw seen"),
        ("send", "sent"),
        ("spend", "spent"),
        ("teach", "taught"),
        ("think", "thought"),
        ("tell", "told"),
        ("win", "won"),
        ("write", "wrote written"),
        ("drive", "drove driven"),
        ("fly", "flew flown"),
        ("grow", "grew grown"),
        ("know", "knew known"),
        ("swim", "swam swum"),
        ("sing", "sang sung"),
        ("fall", "fell fallen"),
        ("bring", "brought"),
        ("build", "built"),
        ("catch", "caught"),
        ("choose", "chose chosen"),
        ("drink", "drank drunk"),
        ("forget", "forgot forgotten"),
        ("hold", "held"),
        ("lend", "lent"),
        ("ride", "rode ridden"),
        ("sleep", "slept"),
        ("speak", "spoke spoken"),
        ("steal", "stole stolen"),
        ("stand", "stood"),
        ("throw", "threw thrown"),
        ("wear", "wore worn"),
        ("wake", "woke woken"),
        ("hear", "heard"),
        ("say", "said"),
        ("fight", "fought"),
        ("bite", "bit bitten"),
        ("hide", "hid hidden"),
        ("shoot", "shot"),
        ("sit", "sat"),
        ("lead", "led"),
    )
    for past in forms.split()
}
_EDGE = "\"'“”‘’()[]{}<>,;:!?."
_POSSESSIVE = ("'s", "’s", "s'", "s’")


# People one's sentences are often about instead of oneself. Not roles that act on
# the speaker ("Landlord put the rent up", "Doctor says no driving" are the speaker's).
KIN = frozenset(
    """mum mom mother dad father parents brother sister sibling son daughter kid kids child
    children baby wife husband partner boyfriend girlfriend fiance fiancee fiancé fiancée
    flatmate roommate housemate friend colleague coworker cousin aunt uncle grandma grandpa
    grandmother grandfather nan gran niece nephew neighbour neighbor""".split()
)
KIN_WORDS = "|".join(sorted(KIN, key=len, reverse=True))  # a regex alternation, longest first


def fold(word: str) -> str:
    """Lower case with typographic apostrophes made plain ("I’m" -> "i'm")."""
    return word.lower().replace("’", "'")


def is_stopword(word: str) -> bool:
    """Whether a raw token ("The", "I’m") is one of the ``STOPWORDS``."""
    return fold(word) in STOPWORDS


# -- search terms and FTS quoting -------------------------------------------------------


def share_in(words: set[str], known: set[str]) -> float:
    """The share of ``words`` that ``known`` holds (0.0 for no words)."""
    return len(words & known) / len(words) if words else 0.0


# An assistant's sentence with this share of its content words already said (to it, or
# in the context shown) repeats them: "Noted (2): my sister Maya lives in Porto".
ECHO_SHARE = 0.6


def query_terms(text: str, *, keep_stopwords: bool = False) -> list[str]:
    """Lower-cased word tokens of ``text`` (stopwords dropped), in order, deduplicated.

    A possessive loses its 's ("Melanie's" -> melanie), other apostrophes go
    ("didnt"); single letters are dropped unless they are digits.
    """
    return list(_query_terms(text, keep_stopwords))


@lru_cache(maxsize=16384)  # context assembly reads the same lines' words many times a turn
def _query_terms(text: str, keep_stopwords: bool) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for m in _TERM.finditer(fold(text)):
        raw = m.group(0)
        w = raw[:-2] if raw.endswith("'s") else raw.replace("'", "")
        if not keep_stopwords and (
            raw in STOPWORDS or w in STOPWORDS or len(w) < 2 and not w.isdigit()
        ):
            continue
        seen.setdefault(w, None)
    return tuple(seen)


def fts_quote(term: str) -> str:
    """``term`` as an FTS5 string: double quotes doubled, so no operator survives."""
    return '"' + term.replace('"', '""') + '"'


def fts_query(text: str, drop: Iterable[str] = ()) -> str | None:
    """An FTS5 MATCH expression OR-ing the quoted terms of ``text``; None if no terms.

    User text never reaches FTS5 unquoted: operators (AND, OR, NEAR, *, ^,
    column filters) and stray quotes become plain quoted terms. Stopwords are
    used only when nothing else is left; ``drop`` removes terms (too frequent
    to be worth ranking), unless that would leave nothing.
    """
    terms = query_terms(text)
    if not terms:
        terms = query_terms(text, keep_stopwords=True)
    if not terms:
        return None
    dropped = set(drop)
    terms = [t for t in terms if t not in dropped] or terms
    return "search_text : (" + " OR ".join(fts_quote(t) for t in terms) + ")"


# -- the answerer's words and stems ------------------------------------------------------


def words(text: str) -> list[str]:
    """Raw word tokens, case kept, apostrophes and hyphens inside words ("self-care")."""
    return _WORD.findall(text)


def stem(word: str) -> str:
    """A light stem for matching question and evidence words ("camping" ~ "camp").

    An irregular past form to its verb ("sold" ~ "sell"), one suffix off, then
    the first five letters: crude, but question and evidence words meet in it
    without a dictionary.
    """
    w = word.lower().strip("'’-").removesuffix("'s").removesuffix("’s")
    w = _IRREGULAR.get(w, w)
    for suffix in _STEM_SUFFIXES:
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[: -len(suffix)]
            break
    return w[:5]


# -- phrase matching: entity names, dossiers -------------------------------------------


def singular(word: str) -> str:
    """A word's matching form: lower case, no possessive, no plural -s ("dogs" ~ "dog")."""
    w = fold(word)
    w = w[:-2] if w.endswith("'s") else w.replace("'", "")
    return w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w


def match_words(text: str) -> list[str]:
    """The words of ``text`` in order, in their matching form (stopwords kept)."""
    return [singular(w) for w in _TERM.findall(text.replace("’", "'"))]


# -- names -------------------------------------------------------------------------------


def person_key(name: str) -> str:
    """The matching key of a person's name: whitespace-normalised and casefolded (any script)."""
    return " ".join(name.split()).casefold()


def name_words(text: str) -> list[str]:
    """Lower-cased words with edge punctuation and possessives stripped ("Melanie’s" → melanie)."""
    out = []
    for raw in text.lower().split():
        word = raw.strip(_EDGE)
        for suffix in _POSSESSIVE:
            if word.endswith(suffix) and len(word) > len(suffix):
                word = word[: -len(suffix)] + ("s" if suffix[0] == "s" else "")
                break
        if word:
            out.append(word.strip(_EDGE))
    return out


# -- whole texts ---------------------------------------------------------------------------


def normalised(text: str) -> str:
    """Casefolded words only: the key under which two claims count as the same statement."""
    return " ".join(re.findall(r"\w+", text.casefold()))


def content_words(text: str) -> set[str]:
    """The lower-cased words of four letters or more that may name a topic."""
    return {w for w in (x.lower() for x in _LETTERS.findall(text)) if w not in TOPIC_STOPWORDS}


# -- change and negation: reconciliation and the answerer read the same cues ---------------

# "off" and "over" end something only where the clause ends: "the cast is off.", "Tuesday
# yoga is over", not "Caroline is off to go do some research" or "over the moon" (read as
# endings, they logged 265 false conflicts on LoCoMo)
_CLAUSE_FINAL = r"(?=\s*(?:[.,;:!?)]|$|\s+(?:now|yesterday|today|finally|at\s+last|for\s+good)\b))"
# A newer statement that says a state changed. Strong cues only: "now" or "since"
# alone ended 700 true LoCoMo facts in reconciliation (measured).
# One's own thing given away ends it: "gave the old iPhone to my dad", "gave away the
# sofa" (not "gave the talk to a full room", "gave my sister a book").
_GAVE = (
    r"gave\s+away|"
    r"gave(?=\s+(?:(?:my|our|his|her)\s+(?:old\s+)?|the\s+old\s+)[\w-]+(?:\s+\d+)?\s+(?:to|away)\b)"
)
# Ending cues read both as endings (``ENDING``) and as naming what ended after them
# (``_ENDS_OBJECT``): "had to stop the food bank shifts", "finished the marathon" (ends
# training for it); a death, "we lost Bruno on Saturday", "lost our old dog" (not "lost
# weight", not "Evan lost Evan's keys": claims write names for pronouns)
_STOPPED = (
    r"(?:had|have|has)\s+to\s+(?:stop|quit|give\s+up|drop|cancel|rehome|sell|close|leave|end|"
    r"give\s+away|move\s+out\s+of)|finished(?=\s+(?:the|my|our)\b)"
)
_LOST = (
    r"lost(?=\s+(?:(?-i:[A-Z])[\w-]*\b(?!['’])|(?:my|our|(?-i:[A-Z])[\w-]*['’]s)\s+"
    r"(?:old\s+)?(?:dog|cat|rabbit|horse|job)\b))"
)
# A thing said to be over, in the copula's forms, read after the thing it ends:
IS_OVER = (
    r"(?:\s+(?:is|are|was|were|has\s+been|have\s+been)|['’]s)\s+(?:"
    # over with nothing after it but how or for whom: "Beard's off!", "Orchard season's
    # done.", "Pottery's finished for me", "The drum kit's gone to a kid down the road",
    # "The vintage shop is no more", "on hold" (not "over the moon", "off to Glasgow",
    # "off sick", "done for the day", "over by an hour")
    r"(?:over|done|finished|off|gone|history|no\s+more|kaput|a\s+thing\s+of\s+the\s+past|"
    r"on\s+(?:hold|pause|ice))\b"
    r"(?=\s*(?:[.,;:!?)]|$)|\s+(?:for\s+(?:me|us|good|ever)|to\s+(?:a|an)\s|now|"
    r"and\s+(?!on\b|above\b|out\b|over\b)|"
    r"at\s+last|already|completely|anyway|sadly|(?:last|this)\s+(?:week|month|year)|"
    r"(?:yesterday|today|finally)\b[^.,;:!?]*(?:[.,;:!?]|$)))|"
    # the passive of an ending: "it's been scrapped", "the shop was sold", but not for a
    # while or somewhere else ("was sold out", "shut down for the holidays")
    r"(?:been\s+)?(?:scrapped|sold|stolen|nicked|written\s+off|axed|demolished|"
    r"repossessed|rehomed|put\s+down|shut\s+down|closed\s+down)\b"
    r"(?!\s+(?:out|for\s+(?:the|a|an|two|three)\s+(?:day|night|week|weekend|holidays?)|"
    r"till|until|today|tonight)\b))"
)
# Ways to end a thing one had or did, each naming it after the cue: "cut out caffeine",
# "closed the shop for good", "ditched the car", "pulled out of the race", "recovered
# from the flu" (not "cut out for", "closed the deal": a shop closed for good, or one's
# own, ended; a door closed did not)
_CEASED = (
    r"cut(?:ting)?\s+out(?!\s+for\b)|(?:ditched|binned|scrapped|dumped|rehom(?:ed|ing))|"
    r"(?:packed|jacked)\s+in|"
    r"(?:closed|shut)\s+(?:down|up)(?=\s+(?:my|our|his|her|their|the|(?-i:[A-Z])[\w-]*['’]s)\b)|"
    r"(?:closed|shut)(?=\s+(?:my|our|his|her|their|(?-i:[A-Z])[\w-]*['’]s)\s+"
    r"(?!eyes|laptop|door|mouth)\w)|"
    r"(?:closed|shut)(?=\s+the\s+(?:[\w'-]+\s+){1,2}(?:down|for\s+good)\b)|"
    # "They closed the Leeds office" (not the door, the deal, the gap)
    r"(?:closed|shut)(?=\s+the\s+(?:(?-i:[A-Z])[\w'-]*\s+)?(?!door|window|deal|gap|curtains|lid|"
    r"blinds|tab|distance|loop|sale|case|book|eyes|laptop|app)[a-z]+\b"
    # not for a while: "closed the shop early today", "for the holidays"
    r"(?![^,.;!?]*\b(?:early|for\s+(?:the\s+)?(?:day|night|holidays?|weekend|lunch|a\s+\w+)|"
    r"at\s+\d|tonight|over\s+christmas)\b))|"
    # "let my club membership lapse"
    r"let\s+(?=(?:my|our|his|her|their|the)\s+(?:[\w'-]+\s+){1,3}lapse\b)|"
    r"(?:pulled|dropped|bowed)\s+out\s+of|withdrew\s+from|(?:stepped|walked)\s+away\s+from|"
    r"moved\s+on\s+from|recovered\s+from|unsubscribed\s+from|separated\s+from|"
    # "Stepped back from the cathedral choir", "wound down Loopy", "Bye bye Tesco"
    r"stepped\s+back\s+from|wound\s+down|wound(?=\s+(?-i:[A-Z])[\w-]+\s+down\b)|"
    r"(?:bye\s+bye|goodbye)(?=\s+(?-i:[A-Z]))|"
    # "Topiramate made me foggy so I'm off it" (not "I'm off to Japan")
    r"(?:['’]m|\bam)\s+off(?=\s+(?:it|them|that|those|the\s+\w+|my\s+\w+)\b)|"
    # "Doctor took me off metformin"; "wrapped up the podcast" (not "wrapped up warm")
    # (claims write the name for "me": "Doctor took Bet off metformin")
    r"(?:took|taken|taking)\s+(?:me|him|her|us|them|(?-i:[A-Z])[\w-]+)\s+off|"
    r"wrapped\s+up(?!\s+(?:warm|well|in)\b)|"
    r"parted\s+ways\s+with|cut\s+ties\s+with|ended\s+things\s+with|"
    r"(?:fired|sacked)\s+from|ended(?=\s+(?:my|our|his|her|their)\b)|"
    r"completed(?=\s+(?:my|our|the)\s+(?!on\b))|discontinued|terminated|"
    # "Not renewing the Clifton lease"; "RIP Nibbles"
    r"not\s+renewing|(?:won['’]t|didn['’]t|did\s+not|will\s+not)\s+renew|(?-i:RIP|R\.I\.P\.?)"
)
# a party that ended, named before the cue: "The shelter closed down", "my visa
# expired", "Raj and I separated", "Sam moved away"
CEASED_PARTY = (
    # "The shelter closed down", not "Jon had to shut down Jon's bank account"
    r"(?:closed|shut)\s+down(?!\s+(?:my|our|his|her|their|its|the|a|an|(?-i:[A-Z])[\w-]*['’]s)\b)|"
    r"went\s+(?:bust|under)|closed\s+(?:its|their)\s+doors|"
    r"expired|(?:(?:and\s+I|we|they)\s+(?:have\s+|had\s+|got\s+)?)separated|parted\s+ways|"
    # "Rosa and I have split" (not "we split the bill")
    r"(?:and\s+I|we|they)\s+(?:have\s+|had\s+|['’]ve\s+)?split(?!\s+(?:the|a|an|it|them|our|my|"
    r"bills?|costs?|up)\b)|"
    r"moved\s+away|(?:has|had|have)\s+ended|wound\s+(?:it\s+)?down"
)
# what one hands in when one leaves: "handed in my notice at the school", "handed in my
# chair at the orchestra"
_HANDED_IN = r"notice|resignation|chair|seat|keys?|badge|uniform|kit|pass|locker|apron|lanyard"
# ... with the particle after it: "Handed my notice in at Grindhouse"
_NOTICE_IN = r"(?:handed|put|gave)\s+(?:my|his|her|their|our)\s+(?:notice|resignation)\s+in"
# a thing ruled out, named just before: "Sugar's off the menu", "parkrun is out for the
# year", "Law is behind me"
OFF_FOR = (
    r"(?:\s+(?:is|are)|['’]s)\s+(?:off\s+the\s+(?:menu|table|cards)|"
    r"out\s+for\s+the\s+(?:year|season|summer|winter|foreseeable)|behind\s+(?:me|us))"
)
# leaving a job or a place, not leaving it for the day: "Left Pixelworks late again"
_LEFT = r"left(?!\s+(?:[\w'’-]+\s+){0,2}?(?:late|early|on\s+time|at\s+\d)\b)"
# read as an ending and, of the thing before it, as what ended: "Architecture wasn't for me"
_NOT_FOR_ME = r"(?:was|were)(?:n['’]t|\s+not)\s+for\s+(?:me|us)"
CHANGE = re.compile(
    r"\b(?:no\s+longer|not\s+any\s*more|any\s*more|anymore|quit|quitting|stopped|"
    r"gave\s+up|given\s+up|sold|switched|swapped|got\s+rid\s+of|broke\s+up|"
    r"cancell?ed|moved\s+out|retired|" + _LEFT + r"|from\s+now\s+on|"
    # "moved over to the data team", "moved to lead the fraud team"; not "moved to the garden"
    r"moved\s+(?:over\s+)?(?:to|into)\s+(?:lead|run|manage|join|work|a\s+new|another|"
    r"the\s+\w+\s+(?:team|department|group|role|office|branch|site))\b)\b",
    re.I,
)
# a cue that stands in a clause of its own, the change named in the next: "From now on,
# aisle seats please"
_LEADING_CUE = re.compile(r"^\W*from\s+now\s+on\W*$", re.I)
# A statement that something ended: the change cues plus endings that name no
# successor ("crutches handed back", "done with iOS"). The answerer's "No".
ENDING = re.compile(
    CHANGE.pattern + r"|\b(?:handed\s+(?:it\s+|them\s+)?back|done\s+with|finished\s+with|"
    r"over\s+with|dropped|gave\s+(?:it|them)\s+(?:up|away)|no\s+more|last\s+day|"
    r"(?:came|comes|come|taken|is|are)\s+off" + _CLAUSE_FINAL + r"|removed|"
    r"handed\s+in\s+(?:\S+\s+)?(?:" + _HANDED_IN + r")|resigned|divorce[ds]?|" + _NOTICE_IN + r"|"
    r"(?:handed|gave|took)\s+(?:the|my|our|his|her|their)\s+(?:[\w'-]+\s+){1,2}back|"
    r"passed\s+(?:my|his|her|their|our|the)\s+final|graduated|deleted|uninstalled|"
    r"put\s+(?:\S+\s+){1,3}away\s+for\s+good|put\s+(?:\S+\s+){1,4}on\s+(?:hold|pause|ice)|"
    r"called\s+off|broke\s+off|stepped\s+down|split\s+up|disbanded|paid\s+off|"
    r"(?:tapered|weaned)\s+(?:myself\s+)?off|came\s+off(?=\s+(?:the|my)\b)|"
    + _STOPPED
    + r"|never\s+(?:[\w'’]+\s+){0,4}again|"
    + _NOT_FOR_ME
    + r"|"
    r"keys?\s+handed\s+(?:over|back|in)|" + _LOST + r"|"
    r"stolen|stole|nicked|"
    r"put\s+\S+\s+down|passed\s+away|died|moving\s+out\s+of|moved\s+out\s+of|"
    r"had\s+to\s+say\s+goodbye\s+to|said\s+(?:a\s+)?(?:final|last)\s+goodbye\s+to|"
    r"traded(?:\s+(?:the|my|our|his|her|their)\s+[\w'-]+)?\s+in|"
    r"laid\s+(?:me\s+|us\s+|him\s+|her\s+|them\s+)?off|called\s+it\s+quits|"
    r"signed\s+(?:me|him|her|us|them)\s+off|"
    r"(?:(?:is|are|was|were)\s+(?:over|gone)|['’]s\s+gone)"
    + _CLAUSE_FINAL
    + r"|(?<=\w)"
    + IS_OVER
    + r"|(?:wrapped|wound)\s+(?:the|my|our|his|her|their|it)\s+(?:[\w'-]+\s+){0,2}up|"
    + _GAVE
    + r"|"
    + _CEASED
    + r"|"
    + CEASED_PARTY
    + r"|"
    + OFF_FOR
    + r"|kicked\s+the\s+habit|(?:got|been|was|were)\s+(?:fired|sacked)|made\s+redundant|"
    r"let\s+(?:me|him|her|us|them)\s+go|in\s+remission|all\s+clear|(?:fully\s+)?recovered|"
    r"discharged|former|ex-\w+|"
    # "used to" a habit since dropped, not "getting used to the lenses"
    r"(?<!\bget\s)(?<!\bgot\s)(?<!\bgets\s)(?<!\bgetting\s)(?<!\bbe\s)(?<!\bam\s)"
    r"(?<!\bis\s)(?<!\bare\s)(?<![’']m\s)used\s+to)\b",
    re.I,
)
# A statement that denies: "no fish", "not in Lyon", "doesn't", "never".
NEGATION = re.compile(
    r"n't\b|\b(?:no|not|never|none|nothing|nobody|nowhere|without|cannot|"
    r"no\s+longer|any\s*more|anymore|sober|teetotal)\b"  # "sober" denies drinking
    r"|\b\w+-free\b"  # "smoke-free" denies smoking
    r"|\b(?:smoke|alcohol|sugar|meat|dairy|caffeine|drug|debt|nicotine|booze|gluten|wheat)\s+free\b",
    re.I,
)

# The endings that name what ended, and where: after the cue ("gave up the choir",
# "last day at Nakamura", "switched from the iPhone") or, for the intransitive ones,
# as the other party before it ("Lucía and I split up", "Inês moved out").
_ENDS_OBJECT = re.compile(
    r"\b(?:no\s+longer|quit|quitting|stopped|gave\s+up|given\s+up|giving\s+up|"
    r"sold(?!\s+(?:by|out)\b)|"
    r"switched\s+from|swapped\s+(?:out\s+)?|got\s+rid\s+of|cancell?ed|" + _LEFT + r"|"
    r"retired\s+from|moved\s+out\s+of|moving\s+out\s+of|done\s+with|finished\s+with|"
    r"traded(?:\s+in)?|(?:tapered|weaned|came)\s+(?:myself\s+)?off(?=\s+(?:the|my|of)\b)|"
    # "had to stop the food bank shifts"; "finished the marathon" ends training for it;
    # "never getting on that bus again"
    r"never\s+(?:getting|going|taking|riding|using|setting\s+foot)(?:\s+(?:on|in|to|back\s+to))?|"
    + _STOPPED
    + r"|"
    r"keys?\s+handed\s+(?:over|back|in)\s+(?:for|to|at|of)|" + _LOST + r"|"
    r"dropped|last\s+day\s+(?:at|of|in)|not\s+with|resigned\s+from|called\s+off|"
    r"broke\s+off|stepped\s+down\s+(?:as|from)|deleted|uninstalled|paid\s+off|stole|nicked|"
    r"had\s+to\s+say\s+goodbye\s+to|said\s+(?:a\s+)?(?:final|last)\s+goodbye\s+to|"
    r"handed\s+in\s+(?:\S+\s+)?(?:"
    + _HANDED_IN
    + r")\s+(?:at|to|for|with)|"
    + _NOTICE_IN
    + r"\s+(?:at|to|for|with)|"
    + _GAVE
    + r"|"
    + _CEASED
    + r")\b",
    re.I,
)
_ENDS_PARTY = re.compile(
    r"\b(?:split\s+up|broke\s+up|called\s+it\s+quits|moved\s+out|divorced|"
    + _NOT_FOR_ME  # "Architecture wasn't for me"
    + r"|"
    r"(?:is|are|was|were)\s+(?:gone|no\s+more)|['’]s\s+gone" + _CLAUSE_FINAL + r"|"
    # someone else's leaving: "Colin got moved to the Leeds branch", "Bea moved in
    # with her boyfriend" (not "moved in with me")
    r"(?:got|was|were|been)\s+(?:moved|transferred)\s+to|moved\s+in\s+with\s+(?:her|his|their)|"
    # one who signed the speaker off ("Physio signed me off")
    r"signed\s+(?:me|him|her|us|them)\s+off|"
    r"handed\s+back|passed\s+away|died|laid\s+off|disbanded|(?:was|were|got)\s+stolen|"
    r"(?:is|are|came|comes|come|(?:was|were|got)(?:\s+taken)?)\s+off"
    + _CLAUSE_FINAL
    + r"|(?:was|were|got)\s+removed|"
    + CEASED_PARTY
    + r")\b",
    re.I,
)
# Words before the thing that ended ("the", "managing the") and words that end it ("today").
_OBJECT_LEAD = frozenset(
    "the a an my our his her their your at from of in on with to it them up out back as "
    "being that this those these off by over down into old former previous".split()
)
_OBJECT_STOP = frozenset(
    "today yesterday tonight this last next and but so because since after before when "
    "now anymore any more for at in on to with was is are were it i we then or which who "
    "that there here finally already just early late soon again yet too work home "
    "behind everything something anything stuff thing things than outside inside near "
    "from by across around though anyway either completely entirely altogether lapse down "
    "totally".split()
)
_POSSESSIVE_NAME = re.compile(r"[A-Z][\w-]*['’]s")
_DETERMINERS = frozenset("the a an my our his her their your that this".split())
_NO_THING = frozenset("one two lot way day end fun top bit few all new old big own".split())
_NOT_PARTY = frozenset(
    "I I'm I've We My Me Our The And But So Update Officially Finally Just Now Today Well".split()
)
# not inside a number: "4:12", "3.1 kilos"
_CLAUSE_END = re.compile(r"[.,:](?!\d)|[;!?()\n\u2014]|\s-\s")


_NEGATED_CUE = re.compile(r"(?:n't|\bnot|\bnever)\s+(?:\w+\s+){0,2}$", re.I)
# a clause ends where punctuation does, or at a conjunction
_CLAUSE = re.compile(_CLAUSE_END.pattern + r"|\b(?:and|but|so|because)\b", re.I)


def change_clauses(text: str) -> list[str]:
    """The clauses of ``text`` that state a change (a ``CHANGE`` cue not negated:
    "I won't quit" and "never gave up" change nothing). What changed is named in
    the cue's own clause: "I left the choir, I play bass now" changed the choir."""
    out = []
    for m in CHANGE.finditer(text):
        if _NEGATED_CUE.search(text[: m.start()]):
            continue
        start = max((b.end() for b in _CLAUSE.finditer(text, 0, m.start())), default=0)
        end = _CLAUSE.search(text, m.end())
        if end and _LEADING_CUE.match(text[start : end.start()]):
            end = _CLAUSE.search(text, end.end())
        out.append(text[start : end.start() if end else len(text)])
    return out


def ended_objects(sentence: str) -> list[str]:
    """What a sentence says came to an end: "Cancelled PureGym" → PureGym, "I'm no
    longer managing the support team" → support team, "Lucía and I split up" → Lucía.

    At most three words each, from the clause of the cue. Reconciliation closes an
    older claim of the same person that names one (and logs the change); the words
    of a switch's new side are never taken ("switched to a Pixel" names no ending).
    """
    found = [thing for thing, _ in endings(sentence)]
    # "No more 7:10 train for me": an ending, though no clause of it is marked history
    # where it stands ("so no more fish" already reads as over)
    found += no_more(sentence)
    # "My shoulder won't take rowing anymore": the word before it, in a denying clause
    found += [m.group(1) for m in _NOT_ANYMORE.finditer(sentence) if not is_stopword(m.group(1))]
    # "Cancelled my gym membership" ended the gym: what it was a membership of ("the
    # food bank shifts": the food bank)
    found += [m.group(1) for t in found if (m := _MEMBERSHIP.fullmatch(t))]
    return list(dict.fromkeys(found))


def names_thing(text: str, thing: str) -> bool:
    """Whether ``text`` names ``thing`` as words, any case, plural or not (a fish that
    ended is not in "overfishing"); a thing of several words by all its words, in any
    order ("Tuesday yoga is over" ends "Yoga every Tuesday evening", "gave up the
    Camden flat" ends "my flat in Camden"); or as the end of a name ("Cancelled the
    gym membership" ended the gym of "Signed up at PureGym")."""
    if re.search(rf"(?<!\w){re.escape(thing)}(?:s|es)?(?!\w)", text, re.I):
        return True
    named = [w for w in re.findall(r"[\w'-]+", thing) if not is_stopword(w)]
    if len(named) > 1:
        return all(re.search(rf"(?<!\w){re.escape(w)}(?:s|es)?(?!\w)", text, re.I) for w in named)
    tail = thing.title()
    return thing.isalpha() and re.search(rf"(?<=[a-z]){re.escape(tail)}(?!\w)", text) is not None


_NO_MORE = re.compile(r"\bno\s+more(?!\s+than\b)", re.I)


def no_more(sentence: str) -> list[str]:
    """What "no more" says ended: "No more 7:10 train for me" → 7:10 train."""
    return [thing for thing, _ in _objects(_NO_MORE, sentence)]


_NOT_ANYMORE = re.compile(
    r"(?:n['’]t|\bnot|\bnever)\s+(?:[\w'-]+\s+){0,3}?([a-z][\w-]{3,})\s+(?:any\s*more|any\s+longer)\b",
    re.I,
)
_MEMBERSHIP = re.compile(
    r"(.+?)\s+(?:membership|subscription|contract|lease|pass|account|shifts?|sessions?|"
    r"lessons?|classes|practice)",
    re.I,
)
_PUT_DOWN = re.compile(r"\bput\s+(?:(?:my|our|the|poor|old)\s+)*([A-Z][\w'-]+)\s+down\b")
# "Handed the Golf back on Friday", "handed my old keys back"; "put the knitting
# needles away for good"
_HANDED_BACK = re.compile(
    r"\b(?:(?:handed|gave|took)\s+(?:the|my|our|his|her|their)\s+(?:old\s+)?"
    r"((?:[\w'-]+\s+)?[\w'-]+)\s+back"
    r"|put\s+(?:the|my|our|his|her|their)\s+(?:old\s+)?((?:[\w'-]+\s+)?[\w'-]+)\s+away\s+"
    r"for\s+good"
    # "Put the OU degree on hold"
    r"|put\s+(?:the|my|our|his|her|their)\s+((?:[\w'-]+\s+){0,2}[\w'-]+)\s+on\s+(?:hold|pause|ice)"
    # "We've wrapped the podcast up after 40 episodes"
    r"|(?:wrapped|wound)\s+(?:the|my|our|his|her|their)\s+((?:[\w'-]+\s+)?[\w'-]+)\s+up)\b",
    re.I,
)
# a thing given back: "the wheelchair went back to the Red Cross" (not "Tom went back
# to the gym": a person who went somewhere ended nothing)
WENT_BACK = re.compile(
    rf"\b(?i:the|my|our|his|her|their)\s+(?:old\s+)?(?!(?:{KIN_WORDS}|friend|boss|partner)s?\b)"
    r"([A-Za-z][\w-]{3,})\s+(?:went|goes|has\s+gone)\s+(?:back\s+to\s+the\b|"
    # "The Fiat went to a guy from Gumtree", "the cot went to a new home"
    r"to\s+(?:a|an)\s+(?:new\s+)?(?:home|owner|buyer|guy|man|woman|lad|family|collector|"
    r"dealer|friend|colleague|neighbour)\b)[^.,;:!?]*"
)
# "so Tuesday yoga is over": the words before it, from the clause's start
_OVER = re.compile(
    r"(?:^|[,.;:!?]\s*|\b(?:so|and|but|because|now)\s+)(?:(?:my|our|the)\s+)?"
    r"((?:[\w'-]+\s+){0,2}?[\w-]+)(?:" + IS_OVER + r"|" + OFF_FOR + r")",
    re.I,
)
# a headline with no verb, a sentence of its own: "BRACES OFF!!!", "Cast off at last!"
# (not a day, a night or time off)
HEADLINE_OFF = re.compile(
    r"(?:^|[.!?]\s+)(?:(?:my|our|the)\s+)?"
    r"((?:[\w'-]+\s+)?(?!(?:day|days|night|nights|time|week|weekend|morning|afternoon|evening|"
    r"hands|lights|gloves|shoes)\b)[\w-]+)\s+(?:off|gone)"
    r"(?:\s+(?:early|at\s+last|finally|today|yesterday))?(?=\s*(?:[.!]|$))",
    re.I,
)


# "Are you still singing with the choir?" - "Not since October": the reply ends it
_STILL = re.compile(
    r"\bstill\s+(?:(?:\w+ing|have|got|go|do|play|at|in|with|on|into|to|for)\s+)*"
    r"(?:(?:the|your|that|those|this|a|an)\s+)?((?:[\w'-]+\s+)?[\w'-]+)",
    re.I,
)
_DENIED_REPLY = re.compile(
    r"^\W*(?:no\b|nope\b|nah\b|not\s+(?:any\s*more|since\b|for\s+(?:a\s+while|ages|months|"
    r"years))|haven['’]t\s+(?:been|done\s+it)\s+since\b|gave\s+(?:it|that)\s+up\b|quit\b)",
    re.I,
)
_NOT_HELD = frozenset("you it that this them there here me us him her".split())


def denied_still(question: str, reply: str) -> str | None:
    """What a reply says no longer holds when it denies a question about what still
    does: "Are you still singing with the choir?" - "Not since October" → "choir";
    None when the question asks no "still" or the reply does not deny it."""
    if not question.rstrip().endswith("?") or not _DENIED_REPLY.match(reply):
        return None
    found = _STILL.search(question)
    if found is None:
        return None
    named = [w for w in found.group(1).split() if w.casefold() not in _OBJECT_STOP]
    if not named or named[-1].casefold() in _NOT_HELD or len(" ".join(named)) < 4:
        return None
    return " ".join(named)


def _objects(cue: re.Pattern[str], sentence: str) -> list[tuple[str, int]]:
    """(what the cue names after it, where its clause ends) for each cue not negated
    ("I won't quit the band"): at most three words, past "the", "my", "managing the"."""
    found = []
    for m in cue.finditer(sentence):
        if _NEGATED_CUE.search(sentence[: m.start()]):
            continue
        clause = _CLAUSE_END.split(sentence[m.end() :], maxsplit=1)[0]
        toks = clause.split()
        i = 0
        while i < len(toks) and (
            toks[i].casefold() in _OBJECT_LEAD
            or _POSSESSIVE_NAME.fullmatch(toks[i])  # claims write "Jon's" for "my"
            or (
                toks[i].casefold().endswith("ing")
                and i + 1 < len(toks)
                and toks[i + 1].casefold() in _DETERMINERS
            )
        ):
            i += 1
        phrase: list[str] = []
        for tok in toks[i : i + 3]:
            if tok.casefold() in _OBJECT_STOP:
                break
            phrase.append(tok.strip("'\"’"))
        # "the car", "my job": a short word after a determiner is a thing, alone ("up") not
        named = (
            bool(phrase)
            and i > 0
            and (toks[i - 1].casefold() in _DETERMINERS or _POSSESSIVE_NAME.fullmatch(toks[i - 1]))
            and len(phrase[0]) == 3
            and phrase[0].casefold() not in _NO_THING
        )
        if phrase and (len(" ".join(phrase)) >= 4 or phrase[0][:1].isupper() or named):
            found.append((" ".join(phrase), m.end() + len(clause.rstrip())))
            # "no more finger pricks and injections": the thing after "and" ended too
            rest = toks[i + len(phrase) :]
            if len(rest) > 1 and rest[0].casefold() in ("and", "or", "nor"):
                also = [t.strip("'\"’!?.") for t in rest[1:3] if t.casefold() not in _OBJECT_STOP]
                # a thing, not a second verb ("finished my screenplay and printed it")
                if (
                    also
                    and not is_stopword(also[0])
                    and len(also[0]) >= 4
                    and not also[0].endswith("ed")
                ):
                    found.append((also[0], m.end() + len(clause.rstrip())))
    return found


_PRONOUN_END = re.compile(r"(?:^|\s)(?:it|they)$", re.I)
_FIRST_THING = re.compile(
    r"^\W*(?:the|my|our|his|her|their|(?-i:[A-Z])[\w-]*['’]s)\s+((?:[\w-]+\s+){0,2}?[\w-]+)"
    r"\s+(?:\w+ed|is|was|are|were|has|had|have|got|went|broke|died|did|does|will|would|can|could)\b",
    re.I,
)


def _antecedent(thing: str, sentence: str) -> str:
    """What "it" or "they" at a thing's end stands for: the sentence's first thing ("The
    Corsa failed its MOT so badly it's been scrapped" ended the Corsa); else the thing."""
    if not _PRONOUN_END.search(thing):
        return thing
    first = _FIRST_THING.match(sentence)
    return first.group(1) if first else thing


@lru_cache(maxsize=16384)  # history marks read every line of a context, every turn
def endings(sentence: str) -> tuple[tuple[str, int], ...]:
    """(what ended, where the clause saying so ends) for each ending the sentence
    states; the offsets let a reader mark that clause as history in place."""
    # "We had to put Biscuit down on Monday": a pet's death; "Tuesday yoga is over"
    said = [
        (_antecedent(m.group(m.lastindex or 1), sentence), m.end())  # the alternative matched
        for m in (
            *_PUT_DOWN.finditer(sentence),
            *_OVER.finditer(sentence),
            *HEADLINE_OFF.finditer(sentence),
            *_HANDED_BACK.finditer(sentence),
            *WENT_BACK.finditer(sentence),
        )
    ]
    found: list[tuple[str, int]] = [
        (thing, end)
        for thing, end in said
        if thing.split()[-1].casefold() not in _OBJECT_STOP | {"that", "this", "everything"}
    ]
    found += _objects(_ENDS_OBJECT, sentence)
    for m in _ENDS_PARTY.finditer(sentence):
        head = _CLAUSE_END.split(sentence[: m.start()])[-1]
        end = m.end() + len(_CLAUSE_END.split(sentence[m.end() :], maxsplit=1)[0].rstrip())
        # an owner ("Maria's grandma passed away") is not the party: the grandma is
        names = [
            w
            for w in re.findall(r"\b[A-ZÀ-Þ][\w'’-]+", head)
            if w not in _NOT_PARTY and not w.endswith(("'s", "’s"))
        ]
        last = (head.split() or [""])[-1]
        if names:
            found += [(n, end) for n in names]
        elif (
            len(last) >= 4
            and last.isalpha()
            and last.casefold() not in _OBJECT_STOP
            and last not in _NOT_PARTY
        ):
            found.append((last, end))  # "crutches handed back", "the cast is off"
    return tuple(found)
