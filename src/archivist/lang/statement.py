"""The words the no-LLM archivist reads a sentence with (write/heuristic.py): fillers and
greetings, requests and the speaker's own questions, verb agreement for the third person, plan,
preference and emotion cues, names, and the words that bound a state's span; the pronouns
index text swaps for names (write/index_text.py) and the words no scene title is made of
(write/scenes.py)."""

from __future__ import annotations

import re

from .text import CALENDAR_WORDS, TOPIC_STOPWORDS

INTERJECTIONS = frozenset(
    "hey hi hello hiya yo wow whoa woah oh ooh ah aw aww awww haha hahaha lol omg yeah yep yup um "
    "umm uh hmm hmmm ok okay".split()
)

# Stripped at the start only when punctuation follows ("Great, ..."), not in "So cool you ...".
SOFT_FILLERS = frozenset(
    "yes no nope well so sure totally absolutely definitely indeed honestly right cool nice "
    "great awesome amazing thanks thank thx ty please".split()
)

FILLERS = INTERJECTIONS | SOFT_FILLERS

LEADING = re.compile(
    r"^(?:(?:(?:" + "|".join(sorted(INTERJECTIONS, key=len, reverse=True)) + r")\b"
    r"|(?:" + "|".join(sorted(SOFT_FILLERS, key=len, reverse=True)) + r")\b(?=\s*[,!.:;~-]))"
    r"[\s,!.:;~-]*)+",
    re.IGNORECASE,
)

GREETING = re.compile(
    r"^(?:(?:it'?s\s+|so\s+|really\s+)?(?:good|nice|great|lovely|glad)\s+to\s+"
    r"(?:see|hear|meet|chat|talk|catch)|how\s+(?:are|have|is|was|'?s|about)\b|what'?s\s+up|"
    r"thank|thanks|thx|bye|goodbye|see\s+(?:you|ya)|talk\s+(?:to\s+you\s+)?(?:soon|later)|"
    r"take\s+care|catch\s+you|have\s+a\s+(?:great|good|nice|lovely)\b|good\s+(?:night|luck|"
    r"morning|evening)|cheers|you\s+too|same\s+here|me\s+too|no\s+(?:problem|worries)|"
    r"you'?re\s+welcome|anytime)",
    re.IGNORECASE,
)

TAG_QUESTION = re.compile(
    r",\s*(?:huh|right|eh|isn't it|aren't they|don't you think|you know)\?+$", re.I
)

WORD_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’-]*")

AS_SAID = re.compile(r"^(?:like|as)\s+[\w'’]+\s+(?:said|says|mentioned|suggested)\s*,\s*", re.I)

# What follows a name used to address someone: "Remember Jon, ...", "... great Jon!".
VOCATIVE_AFTER = re.compile(r"\s*(?:[,!?.]|$|you\b|your\b)", re.I)

# A request tacked onto a statement: the statement before it is still a claim.
REQUEST = re.compile(
    r"\s*(?:[,;:–—-]|\bso\b|\band\b)\s*(?:so\s+)?(?:can|could|would|will)\s+you\b[^.!]*\?+$"
    r"|\s*[,;:–—-]\s*(?:any|got\s+any)\s+(?:tips|ideas|suggestions|advice|recommendations)\b[^.!]*\?+$",
    re.I,
)

# A question about the speaker's own situation: "Should I ...?", "What do I ...?", "Is my ...?"
OWN_QUESTION = re.compile(
    r"^(?:[\w'’]+\s+){0,3}?(?:should|could|can|would|will|do|did|am|was|have|shall|may|might|"
    r"must)\s+I\b|^(?:is|was|does|did|should|would|will|can|are|were)\s+my\b",
    re.IGNORECASE,
)

FIRST_BASES = frozenset("i me my mine myself we us our ours ourselves".split())

SECOND_BASES = frozenset("you your yours yourself".split())

AUX = frozenset(
    "do does did should would could can will have has had may might must shall to let make "
    "made help see saw watch hear heard".split()
)

IRREGULAR_AGREEMENT = {
    "am": "is", "are": "is", "were": "was", "have": "has", "do": "does", "go": "goes",
    "don't": "doesn't", "do not": "does not",
}  # fmt: skip

PRESENT_VERBS = frozenset(
    "feel want think love like need know hope enjoy work live miss wish mean guess believe "
    "plan try get make take see look find say keep wonder agree remember appreciate prefer "
    "hate play run read write paint cook teach learn study help care adore understand eat "
    "drink".split()
)

# "I live", and "I still live" (a word that is no verb between the subject and its verb)
VERB_WORDS = "|".join(sorted(PRESENT_VERBS | AUX | set(IRREGULAR_AGREEMENT), key=len)[::-1])

AGREE = re.compile(
    r"(?<![\w'’])(I|you)\s+(?:((?!(?:" + VERB_WORDS + r")(?![\w'’]))[a-z]+)\s+)?"
    r"(do\s+not|[a-z]+(?:['’]t)?)(?![\w'’])",
    re.IGNORECASE,
)

REPORTED = re.compile(
    r"\b((?i:he|she|they|you)|[A-Z][a-z]+|(?i:my|his|her|their|our|your)\s+\w+)\s+"
    r"(?:\w+ly\s+)?(?i:said|says|told|tells|mentioned|mentions|explained|explains|claims|"
    r"claimed|thinks|thought|believes)\b"
)

PLAN_CUE = re.compile(
    r"\b(?:going\s+to\s+(?!the\b|a\b|an\b|my\b|our\b|his\b|her\b|their\b|your\b|church\b|"
    r"school\b|work\b|bed\b)|gonna|will|shall|wanna|plan(?:s|ning)?\s+(?:to|on)|"
    r"wants?\s+to|hop(?:e|es|ing)\s+to|intend(?:s|ing)?\s+to|would\s+(?:like|love)\s+to|"
    r"thinking\s+(?:about|of)|looking\s+forward\s+to|can['’]?t\s+wait\s+to|cannot\s+wait\s+to|"
    r"aim(?:s|ing)?\s+to|about\s+to|getting\s+ready\s+to)\b|['’](?:ll|d\s+(?:like|love)\s+to)\b",
    re.IGNORECASE,
)

PREFERENCE_CUE = re.compile(
    r"^loving\b|\b(?:lov(?:e|es|ed)|enjoy(?:s|ed|ing)?|prefer(?:s|red)?|hat(?:e|es|ed)|"
    r"favou?rites?|adore[sd]?|passionate\s+about|fan\s+of)\b|"
    r"\b(?:i|we|you|they|he|she|really|also|just|do|does|don['’]t|always|still)\s+lik(?:e|es|ed)\b",
    re.IGNORECASE,
)

IRREGULAR = frozenset(
    "went saw got made took met ran bought did had gave found began came left won lost felt "
    "heard wrote sold built brought caught taught flew drove rode swam sang ate drank wore "
    "became spent sent paid kept held broke fell grew threw chose forgot led shot slept spoke "
    "stood stole woke sat told said overcame".split()
)

NOT_PAST = frozenset(
    "hundred kindred sacred naked wicked talented beloved crooked rugged based related detailed "
    "advanced limited complicated dedicated sophisticated experienced skilled qualified "
    "motivated interested excited tired scared worried stressed blessed bored supposed "
    "overwhelmed inspired amazed thrilled pleased surprised obsessed exhausted delighted "
    "relieved annoyed confused disappointed impressed determined devoted engaged".split()
)

# Words after which an -ed word is a verb in the past ("we explored", "just finished").
DOERS = frozenset(
    "i we he she they you it and just finally also recently then never already actually even "
    "first once both have has had 've ’ve i've i’ve we've we’ve".split()
)

EMOTION = re.compile(
    r"\b(?:lov(?:e|ed|ing)|hate[sd]?|scared|afraid|terrified|excited|thrilled|proud|sad|happy|"
    r"angry|upset|anxious|nervous|worried|stressed|lonely|depressed|overwhelmed|grateful|"
    r"thankful|awful|terrible|wonderful|cr(?:y|ied|ying)|tears|joy|frustrated|hurt|miss(?:ed)?)\b",
    re.IGNORECASE,
)

STRONG = re.compile(
    r"\b(?:passed\s+away|died|death|divorced?|grief|grieving|funeral|cancer|accident|miscarriage|"
    r"suicide|heartbroken|devastated|broke\s+up|breakup|laid\s+off|fired)\b",
    re.IGNORECASE,
)

TITLES = frozenset("dr mr mrs ms mx prof".split())

ENTITY_RUN = re.compile(
    r"(?:\b(?:Dr|Mr|Mrs|Ms|Mx|Prof)\.?\s+)?\b[A-Z][\w'’&-]*"
    r"(?:\s+(?:(?:of|de|da|del|van|von)\s+)?[A-Z][\w'’&-]*)*"
)

NOT_NAMES = (
    frozenset(
        "i i'm i've i'd i'll i’m i’ve i’d i’ll he she they we you it my your his her their our its "
        "this that these those the a an and but or so if when what why how who where which "
        "there".split()
    )
    | CALENDAR_WORDS
    | FILLERS
)

INITIAL_WORDS = NOT_NAMES | frozenset(
    "just also then maybe sometimes whenever remember knowing wish sorry now here after before "
    "since not last next every some many".split()
)

# Words that are no topic of an episode (its keywords are the rest).
KEYWORD_STOPWORDS = NOT_NAMES | TOPIC_STOPWORDS

ABBREVIATIONS = frozenset("dr mr mrs ms mx prof st jr sr vs etc e.g i.e mt ft".split())

# A state said with a time holds from then on unless the sentence sets its end.
SPAN_WINDOW = re.compile(r"\b(?:until|till|through|for\s+(?:the\s+next\s+)?\w+\s+\w+)\b", re.I)

# "Officially from the 1st of November": a state that begins on a day, with no end
SPAN_STARTS = re.compile(r"\b(?:from|starting|as\s+of|effective)\s+(?:on\s+)?(?:the\s+)?\w", re.I)

SPAN_ENDS = re.compile(r"\b(?:to|until|till|through)\b|[-–]\s*\d", re.I)


FIRST_PERSON_SWAPS = {
    "i": "{s}",
    "me": "{s}",
    "myself": "{s}",
    "my": "{s}'s",
    "mine": "{s}'s",
    "i'm": "{s} is",
    "im": "{s} is",
    "i've": "{s} has",
    "i'd": "{s} would",
    "i'll": "{s} will",
}

SECOND_PERSON_SWAPS = {
    "you": "{a}",
    "your": "{a}'s",
    "yours": "{a}'s",
    "yourself": "{a}",
    "you're": "{a} is",
    "you've": "{a} has",
    "you'd": "{a} would",
    "you'll": "{a} will",
}

PRONOUN = re.compile(
    r"(?<![\w'’])(i['’]m|i['’]ve|i['’]d|i['’]ll|you['’]re|you['’]ve|you['’]d|you['’]ll|"
    r"myself|yourself|mine|yours|your|my|me|you|i)(?![\w'’])",
    re.IGNORECASE,
)


# Words of the heuristic narrative template and of dates: they say when, not what about.
TITLE_STOP = CALENDAR_WORDS | frozenset(
    """session sessions talked talk shared said told asked photo picture image week weeks
    month months year years""".split()
)

# a caption that already says what it is: "a voice note", "the menu"; "a photo of …"
ARTICLE = re.compile(r"(?:a|an|the)\s", re.I)
PHOTO_OF = re.compile(r"(?:a|an)\s+(?:photo|picture|image|screenshot)\s+of\b", re.I)
