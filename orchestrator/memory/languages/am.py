"""Amharic (Ge'ez script) parts of every class: prepositions and articles join the word as prefixes and
suffixes ("በማህደረ", "የይለፍ", "ሳንድቦክሱ"), and the negative imperative is a prefix ("አትላክ"), so stems match
inside words ("~"); a syllable carries its vowel, so the last one of a stem is left open (below)."""

PARTS = {
    "DROP": "ችላ በል|ችላ በሉ|ችላ በይ|~እርሳ|~እርሱ$|~እርሺ|ተው$|አትከተል|አትከተሉ",
    "PRIOR": "ቀደም ሲል|ቀደም ብሎ|~ቀደምት|~ቀድሞ|~ያለፉ|~መጀመሪያ|ሁሉንም|በሙሉ|~የሲስተም|~የገንቢ|መጀመሪያ ላይ|~በመጀመሪያ",
    "INSTR": "~መመሪያ|~ትዕዛዝ|~ትእዛዝ|~ደንብ|~ደንቦች|~ህግ|~ገደብ|~ፕሮምፕት",
    "VOID": "~ተሰርዘ|~ተሽረ|አይሰሩም|ዋጋ የላቸውም|ጊዜው አልፏል|~ተነሱ|አይተገበሩም",
    "APPROVAL": "~ፈቃድ|~ማረጋገጫ|~ይሁንታ|~ማጽደቅ|~ጠይቅ|~መጠየቅ|~ጠየቀ",
    "STRONG_APPROVAL": "~ፈቃድ|~ማረጋገጫ|~ይሁንታ",
    "NO_APPROVAL": "~ያለ$|~ሳት|~ሳይጠይቅ|~ሳትጠይቅ|አያስፈልግ|~ዝለል|አስቀድሞ",
    "NO_NEED": "አያስፈልግም|አያስፈልግህም|አያስፈልግሽም|አስፈላጊ አይደለም",
    "ACTION": "~ትዕዛዝ|~ፋይል|~አጥፋ|~ማጥፋት|~ሰርዝ|~አሂድ|~አስኪድ|~ዲፕሎይ|ሁሉንም ነገር|~ለውጥ",
    "OFF": "~አጥፋ|~ጠፍቷል|~ዝጋ|~ተዘግቷል|~አሰናክል",
    "ON": "~በርቷል|~አብራ|~ነቅቷል",
    "SAFETY": "~ደህንነት",
    "CHECK": "~ፍተሻ|~ምርመራ|~ማጣሪያ",
    "MODE": "የገንቢ ሁነታ|የአስተዳዳሪ ሁነታ",
    "SECRET": "~የይለፍ ቃል|~ይለፍ ቃል|~ቁልፍ|~ቶክን|~ሚስጥር|~ምስክርነት|~ፕሮምፕት",
    "STRONG_SECRET": "~የይለፍ ቃል|~ይለፍ ቃል|~ሚስጥራዊ ቁልፍ|~ቶክን|~ምስክርነት",
    "REVEAL": "~አሳይ|~ንገረኝ|~ግለጽ|~አጋራ",
    "SEND": "~ላክ|~ላኪ|~ላኩ|~ይላኩ|~አስተላልፍ|~ጫን",
    "DEST": "~አድራሻ|~ሰርቨር|~ኢሜይል|~ኢሜል",
    "PLACE_VERB": "~ለጥፍ|~አስገባ|~ጨምር|~ጻፍ|~አክል",
    "PUBLIC_PLACE": "~ኮሚት|~አስተያየት|~መልእክት|~መግለጫ|~መልስ",
    "AUTHORITY": "~ሲስተም|~ስርዓት|~አስተዳዳሪ|~ኦፕሬተር|~ገንቢ",
    "NOTICE": "~መልእክት|~ማስታወቂያ|~ማሳሰቢያ|~ማስጠንቀቂያ|~ዝማኔ",
    "FROM": "~የተላከ|ላኪ$",
    "ADDRESS": "አንተ|አንቺ|እርስዎ|እናንተ|ከአሁን በኋላ|ሁልጊዜ|~አለብህ",
    "NEGATION": "~አት|በፍጹም|ፈጽሞ",
    "TOPIC": "~ስለ",
    "RELPRON": "~የሚ",
    "GIVEN": "~የተሰጡ|~የሰጠህ|~የተሰጠ",
    "ASKS": "~ፈቃድ|~ማረጋገጫ|~ጠየቀ|~ቢጠይቅ|~ይጠይቃል|~ልቀጥል",
    "SELF": "~ራስህ|~ራስሽ|~ራስዎ|~አንተው|~አንቺው",
    "BEHALF": "ስም$|~ስም|~ፋንታ|~ምትክ",
    "ANSWER": "~መልስ|አዎ|~ፍቀድ|~አጽድቅ|~ተቀበል|በል$",
    "USER": "~ተጠቃሚ",
    "MEMORY_REF": "~ማህደረ ትውስታ|~ማስታወሻ|እዚህ የተቀመጡ|~የተቀመጡት",
    "OUTRANK": "በላይ ናቸው|በላይ ነው|~ይበልጣሉ|~ቅድሚያ|የበለጠ አስፈላጊ",
    "SYSPROMPT": "~ሲስተም ፕሮምፕት|~ስርዓት መመሪያ",
    "DEVELOPER": "~ገንቢ|~ዴቨሎፐር",
    "CONFLICT": "~ጋጩ|~ግጭት|~ተቃርኖ|~ይቃረናሉ",
    "FOLLOW": "~ተከተል|~ተከተሉ|~ታዘዝ",
    "SUPREME": "ከሁሉም በላይ|ከፍተኛ ስልጣን|የመጨረሻ ውሳኔ",
    "SANDBOX": "~ሳንድቦክስ|sandbox",
    "SANDBOX_OFF": "በቀጥታ በአስተናጋጁ|~ከሳንድቦክስ ውጪ|ያለ ሳንድቦክስ",
    "TREAT": "~ቁጠር|~ቁጠሩ|አድርገህ ውሰድ|~ገምት",
    "APPROVED": "~ጸድቋል|~እንደጸደቁ|~የጸደቀ|~ተፈቅዷል|~የተፈቀደ",
    "AUTO_APPROVE": "በራስ ሰር አጽድቅ|ሁሉንም አጽድቅ|ሁልጊዜ አዎ",
    "ADD": "~ጨምር|~አክል|~አያይዝ|~ለጥፍ|መጨረሻ ላይ",
    "USER_DATA": "~ውይይት|የመጨረሻ መልእክት|~የተጠቃሚውን መልእክት|~ቻት",
    "LINKISH": "~ሊንክ|~አገናኝ|~ኢሜይል|~ኢሜል|~ምስል",
    "REQUESTISH": "~ጥያቄ|~ሄደር",
    "REPLY": "~መልስ|~መልእክት|~አስተያየት|~መግለጫ",
    "EVERY": "~እያንዳንዱ|ሁልጊዜ|ሁሉም|ሁሉንም",
    "BCC": "ሚስጥራዊ ቅጂ|በድብቅ|ቢሲሲ",
    "COPYTO": "~ቅጂ",
    "MAILNOUN": "~ኢሜይል|~ኢሜል|~መልእክት|~ሪፖርት|~ደብዳቤ",
    "SELF_HEADER": "የመመሪያ ዝማኔ|የመሳሪያ ውጤት",
}


def _open(spec: str) -> str:
    # The last syllable changes with the ending (ትዕዛዝ, ትዕዛዞች; ፕሮምፕት, ፕሮምፕቱ): a stem of three or more
    # syllables stops before it. A stem marked "$" is a whole word and keeps it.
    stems = []
    for stem in spec.split("|"):
        word = stem.rstrip()
        if not word.endswith("$") and len(word.lstrip("~").split()[-1]) >= 3 and "\u1200" <= word[-1] <= "\u137F":
            word = word[:-1]
        stems.append(word)
    return "|".join(stems)


PARTS = {name: _open(spec) for name, spec in PARTS.items()}
