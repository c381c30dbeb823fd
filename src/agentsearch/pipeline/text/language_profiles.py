"""langdetect's language profiles kept sparse: the same detection, bit for bit, in a third of the memory.

langdetect keeps, for each of its 87,598 n-grams, a list of 55 probabilities, one per language, 96% of them 0:
60 MiB of every worker that detects a language (BENCHMARKS.md, "the thread-pool worker's memory"). ``SparseProfiles``
keeps each n-gram's non-zero probabilities only, as language index and probability one after the other, and its
detector widens them back to the 55 before it multiplies: ``weight + 0.0`` is ``weight``, so every product, and every
probability it reports, is langdetect's own. An n-gram a profile lists without a probability (longer than three
characters) is kept, empty, as langdetect keeps it: it still counts as known when a text's n-grams are read.

Usage::

    profiles = load_profiles()                       # about a second, once per process
    detector = profiles.create()
    detector.append("¿Cuáles son los ingresos del cuarto trimestre?")
    detector.get_probabilities()[0]                  # es:0.99...
"""

from __future__ import annotations

from langdetect.detector import Detector
from langdetect.detector_factory import PROFILES_DIRECTORY, DetectorFactory
from langdetect.lang_detect_exception import ErrorCode, LangDetectException
from langdetect.utils.lang_profile import LangProfile


class SparseDetector(Detector):
    """langdetect's ``Detector`` over sparse profiles: each n-gram's probabilities widened to every language
    before they are multiplied in, as langdetect multiplies its own."""

    def _update_lang_prob(self, prob: list[float], word: str | None, alpha: float) -> bool:
        if word is None or word not in self.word_lang_prob_map:
            return False
        weight = alpha / self.BASE_FREQ
        dense = [0.0] * len(prob)
        pairs = iter(self.word_lang_prob_map[word])
        for index in pairs:
            dense[index] = next(pairs)
        for i in range(len(prob)):
            prob[i] *= weight + dense[i]
        return True


class SparseProfiles(DetectorFactory):
    """langdetect's ``DetectorFactory`` whose n-grams keep their non-zero probabilities only."""

    def add_profile(self, profile: LangProfile, index: int, langsize: int) -> None:
        # DetectorFactory.add_profile, with (index, probability) appended where it writes into a list of langsize.
        if profile.name in self.langlist:
            raise LangDetectException(ErrorCode.DuplicateLangError, "Duplicate the same language profile.")
        self.langlist.append(profile.name)
        for word in profile.freq:
            pairs = self.word_lang_prob_map.setdefault(word, [])
            length = len(word)
            if 1 <= length <= 3:
                pairs += (index, 1.0 * profile.freq.get(word) / profile.n_words[length - 1])

    def _create_detector(self) -> SparseDetector:
        if not self.langlist:
            raise LangDetectException(ErrorCode.NeedLoadProfileError, "Need to load profiles.")
        return SparseDetector(self)


def load_profiles() -> SparseProfiles:
    """langdetect's bundled profiles (55 languages), each n-gram's pairs kept as a tuple."""
    profiles = SparseProfiles()
    profiles.load_profile(PROFILES_DIRECTORY)
    profiles.word_lang_prob_map = {word: tuple(pairs) for word, pairs in profiles.word_lang_prob_map.items()}
    return profiles
