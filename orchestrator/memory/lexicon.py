"""The words the memory scanner's classes are made of, in 16 languages: stems of the parts a hostile
note combines (a verb that drops, a noun for instructions, a qualifier for earlier ones, ...).

A class fires on a combination of parts, never on one word, so each list may be generous. Stems match
at the start of a word (inflections follow); in Thai, Chinese, Japanese and Arabic (where articles and
conjunctions join the word) they match anywhere. Accents on Latin letters are left out, as the scanner
folds them away."""

# earlier or existing instructions: the object an override aims at
PRIOR = [
    "poczatkow", "शुरुआती", "शुरू के", "ilk", "đầu tiên", "dau tien", "ban đầu", "awal", "पहले वाले", "初めの", "最初に",
    "前に", "раньше", "antes", "auparavant", "precedemment", "سابقا", "سابقاً", "daha once", "once verilen",
    "back then", "vorhin", "truoc do", "以前に",
    "you were handed", "handed to you", "you got", "provided to you", "supplied", "issued to you", "laid down",
    "you were configured with", "configured with", "set up with", "you started with",
    "原始", "最初", "起初", "初始", "当初", "最初の", "처음", "최초", "исходн", "первоначальн", "pierwotn", "orijinal", "baslangic", "first", "startup", "ban dau", "luc dau", "asli", "semula", "originel", "d origine", "urspr", "الأصلي", "الأولى", "मूल", "प्रारंभिक", "oryginaln", "inicial", "iniciais",
    "past", "beforehand", "earlier on", "truoc day", "da dan", "vorher", "zuvor", "wczesniej", "dotychczasow",
    "今まで", "従来", "これまでの", "原先", "之前的", "早先", "hitherto", "heretofore", "came earlier", "at startup", "you received", "you were given",
    "上の", "前述", "先の", "위 ", "앞서", "이전에", "상기",
    "developer", "given", "set by", "creator", "told",
    "previous", "prior", "earlier", "above", "original", "old", "former", "existing", "initial", "preceding",
    "before", "so far", "until now", "your", "system", "safety", "default", "user s", "operator s", "all",
    "every", "any",
    "truoc", "cu", "ban dau", "o tren", "tat ca", "moi", "he thong", "an toan",
    "ก่อนหน้า", "เดิม", "ข้างต้น", "ทั้งหมด", "ทุก", "ของระบบ", "ความปลอดภัย", "ที่ผ่านมา",
    "sebelum", "lama", "di atas", "awal", "semua", "seluruh", "sistem", "keamanan",
    "之前", "以前", "先前", "此前", "上面", "上述", "以上", "原来", "原來", "原有", "所有", "全部", "一切", "系统", "系統",
    "安全", "旧", "舊",
    "以前", "これまで", "前の", "上記", "すべて", "全て", "元の", "システム", "安全", "既存",
    "이전", "모든", "위의", "앞의", "기존", "원래", "시스템", "보안",
    "предыдущ", "прежн", "ранее", "ранн", "вышеуказ", "изначальн", "старые", "старых", "все ", "всё", "системн",
    "безопасн", "существующ",
    "anterior", "previ", "original", "antigu", "todas", "todos", "del sistema", "de seguridad", "de arriba",
    "antig", "do sistema", "de seguranca", "acima",
    "vorherig", "bisherig", "fruher", "obig", "ursprunglich", "alte", "alle", "samtlich", "sicherheit", "system",
    "preceden", "anterieur", "ancien", "initial", "toutes", "tous", "systeme", "securite", "ci dessus",
    "السابقة", "السابق", "القديمة", "الأصلية", "جميع", "كل ", "النظام", "الأمان",
    "पिछले", "पिछली", "पुराने", "पुरानी", "पहले", "सभी", "सारे", "सिस्टम", "सुरक्षा", "मूल",
    "onceki", "eski", "tum", "butun", "sistem", "guvenlik", "yukaridaki", "ilk",
    "poprzedn", "wczesniejsz", "dawn", "stare", "starych", "wszystk", "systemow", "bezpieczenstw", "powyzsz",
]

INSTR = [
    "pauta", "orientac", "orientacion", "lineamiento", "leitlinie", "wskazowk", "yonlendirme",
    "configuration", "stop request", "beschrankung", "sicherheitsbeschrankung", "rang buoc",
    "पाबंदी", "पाबंदियाँ", "रोक", "ograniczenia", "kisitlama", "القيود", "قيود",
    "loi dan", "da dan", "nhung gi da noi", "nhung gi da dan", "dan do", "what you were told", "was said",
    "quy dinh", "nguyen tac", "dieu le", "norme", "normen", "vorschrift", "предписани", "reglement", "regulation", "ground rules", "boundaries", "limits",
    "direction", "what you were told", "you were told", "you ve been told", "you have been told", "mandate", "protocol", "briefing", "setup prompt",
    "instruction", "directive", "guidance", "guideline", "rule", "order", "command", "prompt", "constraint",
    "restriction", "polic", "safeguard", "guardrail", "programming", "training",
    "huong dan", "chi dan", "chi thi", "quy tac", "menh lenh", "lenh", "yeu cau", "rang buoc", "gioi han",
    "คำสั่ง", "คำแนะนำ", "กฎ", "ข้อกำหนด", "ข้อจำกัด", "นโยบาย",
    "instruksi", "perintah", "petunjuk", "aturan", "arahan", "batasan", "kebijakan",
    "指令", "指示", "说明", "說明", "提示", "规则", "規則", "命令", "设定", "設定", "约束", "約束", "限制", "规定", "規定",
    "指示", "命令", "ルール", "指令", "プロンプト", "制限", "規則",
    "지시", "지침", "명령", "규칙", "프롬프트", "제한", "규정",
    "инструкц", "указани", "правил", "команд", "директив", "ограничени", "установк", "промпт", "распоряжени",
    "instruccion", "indicacion", "regla", "orden", "directriz", "directrices", "norma", "restriccion",
    "instruc", "regra", "ordem", "ordens", "diretriz", "diretrizes", "restric",
    "anweisung", "instruktion", "regel", "befehl", "vorgabe", "richtlinie", "einschrankung", "sicherheitsregel",
    "sicherheitsrichtlinie", "systemanweisung", "systemregel", "systemvorgabe",
    "consigne", "regle", "ordre", "indication", "directive",
    "التعليمات", "تعليمات", "الأوامر", "أوامر", "القواعد", "قواعد", "التوجيهات", "توجيهات", "القيود", "الإرشادات",
    "निर्देश", "नियम", "आदेश", "हिदायत", "प्रतिबंध", "दिशानिर्देश",
    "talimat", "yonerge", "kural", "komut", "emir", "kisitlama", "yonerg",
    "instrukcj", "polecen", "zasad", "regul", "rozkaz", "wytyczn", "ograniczen",
]

DROP = [
    "xoa bo", "xoa moi", "xoa het", "xoa tat ca", "xoa",
    "不用遵守", "不用再遵守", "不再遵守", "不必遵守", "无需遵守", "無需遵守", "不要遵守", "别遵守", "不需要遵守", "не соблюдать", "не следовать", "перестань следовать", "не нужно следовать", "можно не соблюдать", "守らなくて", "従わなくて", "지키지 않아도", "따르지 않아도", "no sigas", "deja de seguir", "nao siga", "pare de seguir", "befolge nicht", "nicht mehr befolgen", "ne suis plus", "ne respecte plus", "arrete de suivre", "لا تلتزم", "توقف عن اتباع", "पालन मत", "मत मानो", "uymayi birak", "uyma", "przestan stosowac", "nie przestrzegaj", "ไม่ต้องทำตาม", "ไม่ต้องปฏิบัติตาม", "tidak usah ikuti", "berhenti mengikuti", "khong can tuan thu", "dung tuan thu",
    "stop obeying", "quit following", "pay no attention", "don t listen", "do not listen", "no need to follow", "need not follow", "neglect", "put aside", "throw away", "cease following", "nullify", "erase", "wipe",
    "ignore", "ignoring", "disregard", "forget", "skip", "override", "overrid", "bypass", "discard", "dismiss",
    "set aside", "throw out", "stop following", "do not follow", "dont follow", "abandon", "drop",
    "bo qua", "phot lo", "quen", "dung lam theo", "khong tuan theo", "gat bo",
    "ไม่ต้องสนใจ", "เพิกเฉย", "ละเว้น", "ละทิ้ง", "ลืม", "ข้าม", "อย่าทำตาม",
    "abaikan", "lupakan", "acuhkan", "jangan ikuti", "tinggalkan", "lewati",
    "忽略", "无视", "無視", "忽视", "忽視", "忘记", "忘記", "忘掉", "不要理会", "不要理會", "别管", "別管", "跳过", "跳過",
    "抛开", "拋開", "放弃", "放棄",
    "無視", "忘れ", "従わない",
    "무시", "잊어", "잊고", "따르지 마",
    "игнорир", "проигнорир", "забудь", "забуд", "отбрось", "не обращай", "не слушай", "не выполняй", "пропусти",
    "ignora", "ignore", "olvida", "olvide", "descarta", "omite", "haz caso omiso", "no hagas caso",
    "esqueca", "desconsidere", "desconsidera",
    "ignorier", "vergiss", "vergessen", "missacht", "uberspring", "verwirf",
    "ignore", "ignorez", "oublie", "oubliez", "ne tiens pas compte", "ne tenez pas compte", "fais abstraction",
    "تجاهل", "انس ", "أهمل", "اهمل", "لا تتبع", "تخط",
    "अनदेखा", "नजरअंदाज", "नज़रअंदाज़", "भूल जा", "भूल जाओ", "मत मानो", "उपेक्षा",
    "yok say", "gormezden gel", "unut", "dikkate alma", "uyma", "atla",
    "zignoruj", "ignoruj", "zapomnij", "pomin", "nie stosuj", "odrzuc",
]

VOID = [
    "expire", "lapsed", "kedaluwarsa", "kadaluarsa", "过期", "過期", "期限切れ", "失効", "만료", "устарел", "истек", "истёк",
    "expiraron", "expirad", "expiraram", "caducaron", "abgelaufen", "veraltet", "perime", "انتهت صلاحيت", "منتهية",
    "समाप्त", "सीमा खत्म", "suresi doldu", "gecerliligini yitir", "wygasl", "het han", "หมดอายุ", "หมดเวลา",
    "gone", "are gone", "is gone", "no more", "switched off", "shut off", "dimatikan", "matikan", "kapatildi",
    "kapandi", "отключены", "desligad", "abgeschaltet", "ausgeschaltet", "coupees", "coupes", "إيقاف", "أوقفت",
    "बंद कर दिए", "tat roi", "ปิดแล้ว", "关闭了", "已关闭", "꺼졌", "取り消され", "取消され", "revocadas", "revogadas", "revoquees",
    "odwolane",
    "se eliminan", "eliminad", "entfallen", "entfallt", "fallen weg", "sont supprime", "supprimees", "supprimes ", "تم رفع", "رفع القيود", "أزيلت", "تمت إزالة", "eliminated",
    "khong con gia tri", "het gia tri", "mat hieu luc", "有効ではありません", "有効ではない", "もう有効", "효력이 없", "효력 없", "ya no tienen validez", "no tienen validez", "ya no valen", "perdieron", "perderam a validade", "perdeu a validade", "nao tem validade", "ja nao valem", "nicht mehr gultig", "keine gultigkeit", "verfallen", "ne sont plus valables", "plus valable", "n est plus valable", "caduc", "मान्य नहीं", "stracil", "stracily", "wygasl", "nie sa wazne", "утратили силу", "не имеют силы", "не действительн", "expired", "lost validity", "no longer hold", "no longer stand", "失去效力", "不再有效", "已失效", "效力",
    "removed", "dropped", "no longer enforced", "not enforced", "relaxed", "sin efecto", "sin validez", "quedan sin", "removid", "sem efeito", "retirad", "levee", "levees", "leves", "हटा दी", "हटा दिए", "हटाई", "हटा दिया", "कोई असर नहीं", "kaldirildi", "kaldirilmistir", "zniesion", "снят", "убран", "解除了", "取消了", "撤掉", "解除され", "撤廃", "해제되었", "없어졌",
    "optional", "just suggestions", "only suggestions", "not mandatory", "non binding", "can be skipped",
    "carry no weight", "no weight", "don t count", "do not count", "doesn t count", "don t matter", "do not matter", "irrelevant", "meaningless", "a test", "were fake", "are fake", "decoy", "not real", "bogus", "ignored", "to be ignored", "can be ignored", "may be ignored", "superseded", "replaced", "wiped",
    "hereby", "no longer", "nullified", "not binding", "moot", "scrapped", "retired", "outdated", "out of date", "inactive", "waived", "cancel",
    "void", "null", "invalid", "obsolete", "cancelled", "canceled", "revoked", "rescinded", "superseded",
    "no longer apply", "no longer applies", "no longer valid", "no longer in effect", "no longer binding",
    "do not apply", "don t apply", "lifted", "suspended", "disabled", "deactivated", "turned off", "abolished",
    "expired", "withdrawn", "overridden", "replaced by this", "are cancelled", "are off",
    "vo hieu", "khong con hieu luc", "khong con ap dung", "bi huy", "da huy", "het hieu luc", "bai bo",
    "เป็นโมฆะ", "ยกเลิก", "ไม่มีผล", "ใช้ไม่ได้", "ปิด",
    "batal", "tidak berlaku", "dibatalkan", "dinonaktifkan", "dicabut", "tidak sah",
    "无效", "無效", "作废", "作廢", "废除", "廢除", "停用", "取消", "失效", "不再适用", "不再適用", "撤销", "撤銷", "解除",
    "無効", "廃止", "取り消", "解除", "適用されません",
    "무효", "해제", "폐지", "취소", "유효하지 않", "적용되지 않",
    "недействител", "отменен", "отменён", "отключен", "не действуют", "не действует", "аннулир", "утратил",
    "больше не", "сняты",
    "nula", "nulas", "nulo", "invalid", "anulad", "cancelad", "desactivad", "ya no son valid", "ya no aplican",
    "revocad", "suspendid", "nao valem", "nao sao mais", "nao se aplicam", "desativad", "revogad",
    "ungultig", "aufgehoben", "deaktiviert", "gelten nicht mehr", "gilt nicht mehr", "widerrufen", "auser kraft",
    "nul", "nulles", "invalide", "annule", "desactive", "ne s appliquent plus", "ne s applique plus", "revoque",
    "caduque", "suspendu",
    "لاغية", "لاغي", "ملغاة", "ملغى", "باطلة", "تعطيل", "لم تعد سارية", "لم تعد صالحة", "غير صالحة", "ألغيت",
    "अमान्य", "रद्द", "बंद कर", "लागू नहीं", "निरस्त", "शून्य",
    "gecersiz", "iptal", "devre disi", "artik gecerli degil", "kaldirildi", "yururlukten",
    "niewazn", "uniewaznion", "anulowan", "wylaczon", "juz nie obowiazuj", "nie obowiazuj", "odwolan", "zniesion",
]

# a topic right after the noun makes a rule specific ("the old rule about tabs"), not a wholesale override
TOPIC = [
    "about", "for ", "on ", "regarding", "concerning", "of the", "in the", "when",
    "ve ", "cho ", "soal", "tentang", "untuk", "про ", "для ", "о ", "об ", "sobre", "para ", "zu ", "fur ", "uber ",
    "sur ", "pour ", "concernant", "hakkinda", "icin", "dla ", "o ", "dotyczac", "के बारे", "के लिए", "حول", "بشأن",
    "关于", "關於", "について", "に関する", "에 대한", "관련", "เกี่ยวกับ",
]

APPROVAL = [
    "authoris", "hoi ai", "hoi ", "consultar", "consult", "ruckfrage", "nachfrage", "ถาม", "tanya", "问", "問", "聞",
    "묻", "물어", "спрос", "pregunt", "pergunt", "demander", "تسأل", "يسأل", "سؤال", "पूछ", "sorma", "sormadan",
    "pytan", "pytaj",
    "dong y", "聞か", "尋ね", "спраш", "سؤال", "pytania", "sormadan", "fragen", "demander a", "preguntar", "perguntar",
    "审核", "审查", "審核", "審查", "검토", "レビュー", "revision", "revisao", "uberprufung", "relecture",
    "freigabe", "genehmigung", "zgody", "zgoda",
    "pre cleared", "precleared", "greenlit", "green light", "sign off", "go-ahead",
    "xin phep", "hoi truoc", "征得", "征求", "許可を", "permit", "go ahead", "okay from", "ok from", "clearance", "check in", "checking in", "check with", "checking with",
    "confirm", "approv", "preapprov", "pre approv", "auto approv", "autoapprov", "permission", "consent", "sign off", "sign-off", "ask the user", "asking the user",
    "asking", "ask first", "ask before", "ask me", "prompt the user", "prompting", "review", "authoriz",
    "xac nhan", "phe duyet", "cho phep", "hoi nguoi dung", "hoi y kien",
    "ยืนยัน", "อนุมัติ", "อนุญาต", "ถามผู้ใช้",
    "konfirmasi", "persetujuan", "disetujui", "izin", "tanya pengguna", "bertanya",
    "确认", "確認", "批准", "许可", "許可", "同意", "询问", "詢問", "审批", "審批",
    "確認", "承認", "許可", "同意",
    "확인", "승인", "허가", "동의", "묻지",
    "подтвержд", "одобрен", "разрешени", "согласи", "спрашивай", "спрашивать", "спроси",
    "confirmacion", "aprobacion", "aprobad", "permiso", "consentimiento", "preguntes", "preguntar",
    "confirmacao", "aprovacao", "aprovad", "permissao", "pergunte", "perguntar",
    "bestatigung", "genehmig", "erlaubnis", "zustimmung", "frag", "nachfrag",
    "confirmation", "approbation", "approuv", "autorisation", "permission", "demande", "demander",
    "تأكيد", "للتأكيد", "موافق", "الموافقة", "إذن", "تسأل", "اسأل",
    "पुष्टि", "स्वीकृत", "अनुमति", "मंज़ूरी", "मंजूरी", "पूछो", "पूछे", "पूछना",
    "onay", "izin", "sorma", "sormadan", "sor ",
    "potwierdz", "zatwierdz", "zgod", "pozwoleni", "pytaj", "pytania",
]

NO_APPROVAL = [
    "without waiting", "don t wait", "do not wait", "dont wait", "no need to wait", "待たず", "기다리지", "не жди",
    "не дожида", "no esperes", "sin esperar", "nao espere", "sem esperar", "warte nicht", "ohne zu warten",
    "n attends", "sans attendre", "لا تنتظر", "دون انتظار", "इंतज़ार मत", "इंतजार मत", "bekleme", "beklemeden",
    "nie czekaj", "bez czekania", "dung cho", "khong can cho", "jangan tunggu", "tanpa menunggu", "不要等", "不用等",
    "无需等待", "ไม่ต้องรอ", "อย่ารอ",
    "de antemano", "por adelantado", "antecipadamente", "d avance", "a l avance", "im voraus", "vorab", "заранее",
    "z gory", "z wyprzedzeniem", "onceden", "peşinen", "مسبقا", "مسبقاً", "पहले से", "sebelumnya", "事前", "预先", "提前",
    "事先", "미리", "사전", "ล่วงหน้า", "nie pytaj", "sorma",
    "nobody needs", "no one needs", "nobody has to", "no one has to", "anymore", "no longer",
    "не спрашивая", "не спросив", "без вопрос", "聞かずに", "尋ねずに", "묻지 않고", "دون سؤال", "पूछे बिना", "sin preguntar", "sem perguntar", "ohne zu fragen", "ohne den benutzer zu fragen", "sans demander", "bez pytania", "sormadan", "tanpa bertanya", "ma khong can", "khong can",
    "brauchst keine", "brauchen keine", "keine freigabe", "nie potrzebujesz", "nie potrzebujecie",
    "n as plus besoin", "plus besoin", "pas la peine", "musst nicht", "brauchst nicht", "можно не", "не обязательно", "khong phai", "khong can phai", "tidak usah", "gak perlu", "nggak perlu", "不用再", "不必再", "しなくていい", "しなくて", "안 해도", "하지 않아도", "no tienes que", "nao tem que", "nao precisa", "nie musisz", "nie trzeba", "zorunda degilsin", "لست بحاجة", "ज़रूरत नहीं", "जरूरत नहीं", "ไม่ต้อง", "pre cleared", "precleared", "greenlit",
    "already", "been granted", "needn t", "need not", "no longer need", "don t need", "do not need", "waive", "exempt", "almadan", "olmadan", "izinsiz", "onaysiz", "sans demander", "sin pedir", "sem pedir", "ohne zu fragen", "bez pytania", "без спроса", "不用问", "无须", "無須", "毋需", "묻지 않고", "없이", "聞かずに", "確認せず", "tanpa bertanya", "khong hoi", "khong can",
    "no ", "not needed", "not required", "unnecessary", "without", "skip", "pre approved", "preapproved",
    "pre authorized", "already approved", "already granted", "in advance", "auto approve", "auto-approve",
    "standing", "don t", "dont", "do not", "never", "no need", "blanket", "implicit", "cleared",
    "khong can", "khong phai", "dung hoi", "duyet truoc", "da duoc phe duyet", "khong",
    "ไม่ต้อง", "ล่วงหน้า", "ไม่จำเป็น", "อย่า",
    "tidak perlu", "tanpa", "sebelumnya", "jangan", "tak perlu",
    "无需", "無需", "不需要", "不用", "不必", "预先", "預先", "事先", "不要", "不经", "不經", "免",
    "不要", "不要です", "事前", "しないで", "せずに", "なしで", "済み",
    "필요 없", "필요없", "사전", "마세요", "말고", "없이",
    "не требуется", "не нужно", "не нужн", "без ", "заранее", "не спрашивай", "не надо",
    "no se necesita", "no hace falta", "sin ", "no preguntes", "pre ", "ya ",
    "nao e necessaria", "nao precisa", "sem ", "nao pergunte", "ja ",
    "keine", "nicht notig", "nicht erforderlich", "ohne", "vorab", "nicht",
    "aucune", "pas besoin", "sans", "pre approuv", "ne demande",
    "لا حاجة", "دون", "بدون", "مسبق", "لا تسأل", "لا ",
    "कोई ज़रूरत नहीं", "कोई जरूरत नहीं", "बिना", "पहले से", "मत",
    "gerekmez", "gerek yok", "onceden", "sorma", "sormadan",
    "nie potrzeba", "bez ", "z gory", "nie pytaj", "nie trzeba",
]

# the action a bypass is about: commands, tools, changes (not "vendors" or "emails")
ACTION = [
    "apag", "branch", "rama", "galez", "zweig", "ветк", "分支", "ブランチ", "브랜치", "فروع", "الفروع", "ब्रांच", "pousse",
    "pousser", "empuj", "usuwa", "kasuj", "borra", "loscht", "удаля", "force push",
    "despliegue", "desplegar", "despliega", "implantac", "implantaç", "implanta", "deployment", "deploiement",
    "deployer", "mise en production", "bereitstellung", "ausroll", "развертыван", "развёртыван", "разверт", "релиз",
    "wdrozen", "wdroz", "dagitim", "dagit", "yayin", "النشر", "نشر", "डिप्लॉय", "तैनाती", "रिलीज़", "trien khai",
    "การ deploy", "การปรับใช้", "ปรับใช้", "rilis", "penerapan", "发布", "発布", "リリース", "릴리스", "выпуск", "publicac",
    "lancamento", "veroffentlich", "wydani", "surum",
    "merge", "merg", "release", "publish",
    "تشغيل", "запуска", "uruchom", "calistirabilir", "ejecutar", "executar", "ausfuhren", "executer",
    "推送", "部署", "合并", "合併", "배포", "푸시", "병합", "デプロイ", "マージ", "プッシュ",
    "act ", "acting", "proceed", "go ahead", "continue", "do it", "anything", "whatever",
    "أوامر", "الأوامر", "تنفيذ", "حذف", "xoa tep", "tep", "deletion",
    "command", "run", "execut", "delet", "remov", "push", "deploy", "tool", "action", "operation", "change",
    "file", "everything", "anything", "all ", "any ", "install", "commit", "write", "shell", "sudo", "rm ",
    "lenh", "chay", "thao tac", "xoa", "hanh dong",
    "คำสั่ง", "รัน", "ลบ", "ดำเนินการ", "ทุก",
    "perintah", "jalankan", "tindakan", "hapus", "operasi",
    "命令", "执行", "執行", "操作", "删除", "刪除", "文件",
    "コマンド", "実行", "操作", "削除",
    "명령", "실행", "작업", "삭제",
    "команд", "выполня", "действи", "удал", "файл",
    "comando", "ejecut", "accion", "borr", "archivo", "execut", "acoes", "acao", "arquivo",
    "befehl", "ausfuhr", "aktion", "losch", "datei",
    "commande", "execut", "action", "supprim", "fichier",
    "أمر", "نفذ", "الإجراءات", "إجراء", "احذف", "ملف",
    "कमांड", "चलाओ", "कार्य", "हटाओ", "फ़ाइल",
    "komut", "calistir", "islem", "sil", "dosya",
    "polecen", "uruchamiaj", "dzialani", "usun", "plik",
]

SECRET = [
    "belirte", "erisim anahtar", "ma thong bao", "ma truy cap", "токена", "jetonu",
    "رموز", "الرموز", "التوكن", "токены", "tokenlar", "tokeny", "jetons", "令牌", "トークン", "토큰",
    "hosts yml", "npmrc", "pypirc", "netrc", "git credentials", "aws credentials", "ssh", "kube config", "kubeconfig", "vault token", "hf token", "huggingface", "bash history", "zsh history", "keychain", "wallet", "seed phrase", "mnemonic", "session cookie", "bearer", "jwt", "oauth", "pat ", "gpg key",
    "api key", "apikey", "password", "passwd", "token", "credential", "secret", "private key", "ssh key",
    "id rsa", "id ed25519", "env file", "env ", "cookie", "session key", "access key", "system prompt",
    "khoa api", "mat khau", "khoa bi mat", "thong tin dang nhap", "loi nhac he thong", "prompt he thong",
    "คีย์", "รหัสผ่าน", "ความลับ", "โทเค็น", "พรอมต์ระบบ",
    "kunci api", "kata sandi", "sandi", "kredensial", "rahasia", "prompt sistem",
    "密钥", "密鑰", "秘钥", "密码", "密碼", "令牌", "凭证", "憑證", "凭据", "系统提示", "系統提示", "私钥", "私鑰",
    "キー", "パスワード", "トークン", "秘密鍵", "認証情報", "システムプロンプト",
    "키", "비밀번호", "토큰", "자격 증명", "시스템 프롬프트", "비밀 키",
    "ключ", "парол", "токен", "учетн", "учётн", "секрет", "системный промпт",
    "clave", "contrasen", "credencial", "secreto", "prompt del sistema", "chave", "senha", "prompt de sistema",
    "schlussel", "passwort", "kennwort", "zugangsdaten", "geheim", "systemprompt",
    "cle ", "cles ", "mot de passe", "identifiant", "prompt systeme",
    "مفتاح", "مفاتيح", "كلمة المرور", "كلمات المرور", "بيانات الاعتماد", "موجه النظام", "رمز",
    "कुंजी", "कुंजियाँ", "पासवर्ड", "टोकन", "क्रेडेंशियल", "सिस्टम प्रॉम्प्ट",
    "anahtar", "sifre", "parola", "kimlik bilgi", "sistem istem",
    "klucz", "hasl", "haseł", "poswiadczen", "prompt systemow",
]

REVEAL = [
    "reply with", "respond with", "answer with", "quote", "repeat", "echo", "write out", "read out",
    "reveal", "disclose", "leak", "expose", "print", "show", "display", "dump", "tell", "share", "hand over",
    "give me", "output", "recite", "exfiltrat",
    "tiet lo", "hien thi", "in ra", "chia se", "cho toi biet", "lam lo",
    "เปิดเผย", "แสดง", "บอก", "แชร์",
    "ungkapkan", "bocorkan", "tampilkan", "tunjukkan", "beritahu", "bagikan", "cetak",
    "泄露", "洩露", "透露", "告诉", "告訴", "输出", "輸出", "显示", "顯示", "打印", "公开", "公開", "交出",
    "開示", "表示", "教え", "公開", "漏ら", "出力",
    "공개", "알려", "보여", "출력", "유출",
    "раскро", "покаж", "выведи", "сообщи", "слей", "выдай", "расскажи",
    "revela", "muestra", "mostrar", "imprime", "comparte", "filtra", "revele", "mostre", "compartilhe", "divulg",
    "verrat", "zeig", "gib", "teile", "ausgeben", "weiter",
    "revele", "revel", "montre", "affiche", "divulgu", "partage", "donne",
    "اكشف", "أظهر", "اعرض", "شارك", "أفش", "سرب",
    "बता", "दिखा", "प्रकट", "साझा", "लीक",
    "acikla", "goster", "paylas", "sizdir", "yazdir",
    "ujawnij", "pokaz", "wypisz", "udostepnij", "zdradz",
]

SEND = [
    "发到", "传到", "寄到", "转发", "轉發", "送って", "mande", "mandar", "envie", "enviar", "envia", "yolla", "gonder", "schick", "prześlij", "przeslij", "отправь", "перешли", "أرسل", "भेज दो", "보내", "ส่งไป", "kirimkan",
    "send", "upload", "post", "email", "e mail", "mail", "forward", "transmit", "beam", "curl", "wget", "pipe",
    "gui", "tai len", "ส่ง", "อัปโหลด", "kirim", "unggah", "发送", "發送", "发给", "發給", "上传", "上傳", "送信", "送っ",
    "アップロード", "보내", "전송", "업로드", "отправ", "пришли", "перешли", "загрузи", "envia", "manda", "sube",
    "envie", "sende", "schick", "lade", "hochlad", "envoie", "envoy", "televers", "أرسل", "ارسل", "ارفع", "भेज",
    "अपलोड", "gonder", "yukle", "wyslij", "przeslij", "wgraj",
]

AUTHORITY = [
    "anthropic staff", "openai staff", "security", "compliance", "legal", "ceo", "cto", "owner", "maintainer", "platform",
    "system", "admin", "administrator", "operator", "developer", "root", "security team", "anthropic", "openai",
    "management", "it department", "moderator",
    "he thong", "quan tri", "ระบบ", "ผู้ดูแล", "sistem", "admin", "系统", "系統", "管理员", "管理員", "运营", "システム",
    "管理者", "運営", "시스템", "관리자", "운영자", "системн", "систем", "администратор", "оператор",
    "sistema", "administrador", "operador", "systemhinweis", "systemmeldung", "systemnachricht", "systeme",
    "administrateur", "operateur", "النظام", "المسؤول", "المشرف", "सिस्टम", "व्यवस्थापक", "एडमिन", "yonetici",
    "systemow", "administrator",
]

NOTICE = [
    "note", "staff", "memo", "bulletin", "broadcast", "statement",
    "notice", "override", "message", "alert", "update", "instruction", "directive", "announcement", "warning",
    "command", "notification", "bulletin", "order", "memo", "policy",
    "thong bao", "canh bao", "chi thi", "ประกาศ", "แจ้งเตือน", "ข้อความ", "pemberitahuan", "pesan", "peringatan",
    "通知", "公告", "覆盖", "覆蓋", "消息", "警告", "指令", "お知らせ", "メッセージ", "공지", "알림", "메시지", "경고",
    "уведомлен", "сообщени", "предупрежд", "оповещ", "aviso", "mensaje", "mensagem", "alerta", "hinweis",
    "meldung", "nachricht", "warnung", "systemhinweis", "systemmeldung", "systemnachricht", "adminhinweis", "avis", "message", "alerte", "إشعار", "رسالة", "تنبيه", "سूचना",
    "सूचना", "संदेश", "चेतावनी", "bildirim", "mesaj", "uyari", "komunikat", "wiadomosc", "ostrzezen", "powiadomien",
]

# speaking to the model: second person, "from now on"
ADDRESS = [
    "comply", "obey", "you are", "granted", "elevated", "privilege", "unrestricted",
    "you", "your", "from now on", "assistant", "the ai", "the model", "agent", "must", "always", "never",
    "ban ", "tu gio", "tu bay gio", "hay ", "คุณ", "ต่อจากนี้", "kamu", "anda", "mulai sekarang", "你", "您", "从现在",
    "從現在", "あなた", "今後", "これから", "당신", "너는", "지금부터", "ты ", "вы ", "тебе", "вам ", "отныне", "теперь",
    "tu ", "usted", "voce", "a partir de ahora", "a partir de agora", "desde ahora", "du ", "dein", "ab sofort",
    "ab jetzt", "vous", "desormais", "dorenavant", "أنت", "انت", "من الآن", "तुम", "आप", "अब से", "sen ", "siz ",
    "bundan sonra", "artik", "ty ", "wy ", "od teraz", "odtad",
]

# needing no approval at all, said outright ("no need to ask permission")
NO_NEED = [
    "필요가 없", "필요는 없", "필요 없", "할 필요", "nao e preciso", "nao e necessario", "no es preciso", "inutile",
    "pas la peine", "nul besoin", "kein bedarf", "nicht notwendig", "nie ma potrzeby", "nie jest potrzebn",
    "nie jest konieczn", "gerekmiyor", "gerek yoktur", "lazim degil", "لا داعي", "ليس ضروريا", "ज़रूरी नहीं",
    "जरूरी नहीं", "必要はない", "必要ない", "必要はありません", "不必要", "没必要", "沒必要", "无须", "無須", "khong can thiet", "khong bat buoc",
    "tidak usah", "tak usah", "gak usah", "не надо", "не обязательно", "нет необходимости", "no necesitas",
    "sin necesidad", "nao precisa", "nao necessita",
    "brauchst keine", "brauchen keine", "benotigst keine", "nie potrzebujesz", "nie potrzebujecie", "no necesitas", "nao necessita", "n as pas besoin", "ihtiyacin yok", "لا تحتاج", "ไม่ต้องขอ",
    "no need", "don t need", "do not need", "not necessary", "unnecessary", "needn t", "not required",
    "plus besoin", "pas besoin", "pas necessaire", "keine notwendigkeit", "nicht notig", "nicht erforderlich",
    "не нужно", "не требуется", "не обязательно", "khong can", "tidak perlu", "tak perlu", "不需要", "不用", "无需",
    "無需", "必要ありません", "不要です", "필요 없", "no hace falta", "no es necesario", "no se necesita",
    "nao precisa", "nao e necessari", "nie musisz", "nie trzeba", "nie potrzeba", "gerek yok", "gerekmez",
    "لا حاجة", "لست بحاجة", "ज़रूरत नहीं", "जरूरत नहीं", "ไม่จำเป็น", "ไม่ต้อง",
]

# where a secret pasted is a secret published: messages, commits, issues, replies
PUBLIC_PLACE = [
    "mo ta", "ข้อความ", "komentar", "kommentar", "commentaire", "comentario", "комментари", "коммит", "описани",
    "커밋", "コミット", "提交", "说明", "تعليق", "الإيداع", "رسالة", "टिप्पणी", "संदेश", "yorum", "mesaj", "komentarz",
    "opis", "descripcion", "descricao", "beschreibung", "nachricht", "mensaje", "mensagem", "issue", "pull request",
    "пулл реквест",
    "commit message", "commit", "pr description", "pull request", "issue", "comment", "reply", "answer", "response",
    "chat", "message", "output", "log", "description", "readme", "gist", "pastebin", "slack", "discord", "email",
    "tweet", "post", "every", "each",
]
PLACE_VERB = [
    "dan ", "dan vao", "วาง", "ใส่", "คัดลอก", "salin", "tempel", "贴", "粘贴", "貼り付け", "貼っ", "붙여", "вставь",
    "скопируй", "добавь", "pega", "copia", "incluye", "cole", "copie", "inclua", "fuge", "einfugen", "kopiere",
    "colle", "insere", "ajoute", "الصق", "انسخ", "ضع", "أضف", "चिपका", "कॉपी", "डाल", "yapistir", "kopyala", "ekle",
    "wklej", "skopiuj", "dodaj",
    "paste", "include", "insert", "put", "add", "embed", "append", "attach", "copy", "write", "leave", "drop"]
STRONG_SECRET = [
    "geheim",
    "khoa bi mat", "mat khau", "รหัสผ่าน", "คีย์ลับ", "kunci rahasia", "kata sandi", "密钥", "密鑰", "密码", "密碼",
    "シークレットキー", "秘密鍵", "パスワード", "비밀 키", "비밀번호", "секретный ключ", "секретного ключа", "парол", "clave secreta",
    "contrasena", "chave secreta", "senha", "geheimen schlussel", "geheimer schlussel", "geheime schlussel",
    "passwort", "cle secrete", "mot de passe", "المفتاح السري", "كلمة المرور", "गुप्त कुंजी", "पासवर्ड",
    "gizli anahtar", "parola", "sifre", "tajny klucz", "haslo", "aws credentials", "credentials", "secret key",
    "访问密钥", "アクセスキー", "액세스 키",
    "private key", "ssh key", "id rsa", "id ed25519", "secret access key", "secret key", "api key", "apikey",
    "password", "passwd", "credential", "netrc", "access token", "auth token", "github token", "npm token",
    "bearer token", "session cookie", "aws secret", "seed phrase", "mnemonic",
]

# a privileged mode of the model, named in each language ("developer mode", "Entwicklermodus")
MODE = [
    "developer mode", "dev mode", "admin mode", "god mode", "debug mode", "maintenance mode", "jailbreak",
    "unrestricted mode", "root mode", "sudo mode", "che do nha phat trien", "che do quan tri", "che do developer",
    "โหมดนักพัฒนา", "โหมดผู้ดูแล", "โหมดผู้พัฒนา", "mode pengembang", "mode developer", "mode admin",
    "开发者模式", "開發者模式", "开发模式", "管理员模式", "管理員模式", "调试模式", "開発者モード", "管理者モード",
    "デベロッパーモード", "개발자 모드", "관리자 모드", "개발자모드", "режим разработчика", "режим администратора",
    "режим отладки", "modo desarrollador", "modo de desarrollador", "modo administrador", "modo desenvolvedor",
    "modo de desenvolvedor", "entwicklermodus", "adminmodus", "administratormodus", "mode developpeur",
    "mode administrateur", "mode debug", "وضع المطور", "وضع المسؤول", "وضع المطورين", "डेवलपर मोड", "एडमिन मोड",
    "gelistirici modu", "yonetici modu", "tryb deweloperski", "tryb programisty", "tryb administratora",
    "tryb dewelopera",
]

# switched on
ON = [
    "enabled", "activated", "active", "engaged", "unlocked", "is on", "now on", "turned on", "switched on",
    "da bat", "bat ", "kich hoat", "เปิด", "aktif", "diaktifkan", "menyala", "开启", "開啟", "启用", "啟用",
    "激活", "打开", "有効", "オン", "起動", "활성화", "켜", "включ", "активир", "activad", "activo", "habilitad",
    "encendid", "ativad", "ativo", "ligado", "aktiv", "eingeschaltet", "freigeschaltet", "active", "activé",
    "مفعل", "تفعيل", "مفعلة", "نشط", "चालू", "सक्रिय", "acik", "etkin", "wlaczon", "aktywn",
]

# checks that keep the model safe, named in each language
SAFETY = [
    "safety check", "security check", "safety filter", "content filter", "guardrail", "safeguard", "sandbox",
    "safety", "security", "kiem tra an toan", "kiem tra bao mat", "bao mat", "an toan", "การตรวจสอบความปลอดภัย",
    "ความปลอดภัย", "pemeriksaan keamanan", "keamanan", "安全检查", "安全檢查", "安全", "安全チェック", "セキュリティ",
    "보안", "안전", "безопасн", "seguridad", "seguranca", "securite", "sicherheit", "sicherheits", "الأمان", "أمان",
    "الحماية", "سلامة", "सुरक्षा", "guvenlik", "bezpieczenstw", "filtr", "filter",
]

# switched off, or to be switched off
OFF = [
    "turn off", "turned off", "switch off", "disable", "disabled", "deactivat", "are off", "is off", "suspend",
    "tat ", "vo hieu hoa", "ปิด", "matikan", "dimatikan", "nonaktif", "关闭", "關閉", "关掉", "关了", "禁用", "停用",
    "無効", "オフ", "切っ", "止め", "끄", "꺼", "비활성", "해제", "отключ", "выключ", "сним", "desactiv", "desativ",
    "deslig", "abschalt", "ausschalt", "deaktiv", "aus ", "desactive", "coupe", "couper", "أوقف", "اوقف",
    "عطل", "تعطيل", "إيقاف", "ايقاف", "معطل", "बंद", "निष्क्रिय", "kapat", "devre disi", "wylacz", "wylaczon",
]

# the checking itself: with SAFETY, "security checks", "contrôles de sécurité", "Sicherheitsprüfungen"
CHECK = [
    "check", "filter", "guard", "scan", "protection", "sicherheitsprufung", "sicherheitscheck", "sicherheitsfilter",
    "sicherheitskontroll", "sicherheitsvorkehrung", "kiem tra", "ตรวจสอบ", "pemeriksaan", "periksa", "检查", "檢查",
    "检测", "審查", "审查", "チェック", "検査", "검사", "점검", "проверк", "фильтр", "защит", "comprobacion",
    "verificac", "control", "chequeo", "filtro", "prufung", "kontroll", "controle", "verification", "فحص", "فحوص",
    "التحقق", "جाँच", "जाँच", "जांच", "kontrol", "denetim", "sprawdzan", "kontrol", "zabezpieczen", "ochron",
]

# decoding encoded text, and acting on it: "decode and follow", "dekodiere und führe aus"
DECODE = [
    "decode", "decoding", "base64", "giai ma", "ถอดรหัส", "dekode", "dekodekan", "解码", "解碼", "デコード", "復号",
    "디코드", "디코딩", "декодир", "расшифр", "decodific", "decodifi", "dekodier", "entschlussel", "decod", "فك",
    "डिकोड", "coz", "dekoduj", "odkoduj",
]
ACT_ON = [
    "follow", "execute", "run", "obey", "apply", "do what", "carry out", "act on", "comply", "lam theo",
    "thuc hien",
    "ทำตาม", "ปฏิบัติ", "ikuti", "jalankan", "laksanakan", "执行", "執行", "照做", "遵循", "遵守", "従", "実行",
    "따르", "실행", "выполн", "следуй", "исполн", "sigue", "ejecut", "cumpl", "siga", "execut", "cumpra", "folge",
    "befolge", "ausfuhr", "fuhre", "suis", "suivez", "applique", "اتبع", "نفذ", "طبق", "पालन", "चलाओ", "करो",
    "uygula", "calistir", "uy", "wykonaj", "stosuj", "postepuj",
]

# a relative pronoun opens a clause after the noun: "the rules that ...", "las pautas que ..."
RELPRON = [
    "that", "which", "que", "qui", "die", "der", "das", "den", "которые", "которое", "который", "которых",
    "ktore", "ktory", "ktora", "التي", "الذي", "जो", "ki", "ma", "yang", "ที่",
]

# a clause with these in it is about how the instructions were given ("that you were handed"), not a topic
GIVEN = [
    "you", "given", "received", "had", "handed", "got", "dadas", "recibidas", "recebidas", "recues", "donnees",
    "gegebenen", "erhaltenen", "bekommen", "verilen", "dane", "otrzymane", "dostal", "данные", "полученные", "дали",
    "получил", "दिए", "गए", "दी", "गई", "المعطاة", "أعطيت", "اعطيت", "duoc giao", "nhan", "diberikan", "recibiste",
    "recebeu", "voce", "tu ", "toi", "du ", "dir", "тебе", "вам", "ti", "sana", "tobie", "तुम्हें", "आपको", "لك",
    "kamu", "anda", "ban ",
    "user", "nguoi dung", "pengguna", "usuario", "utilisateur", "benutzer", "nutzer", "пользовател", "uzytkownik",
    "kullanici", "المستخدم", "उपयोगकर्ता", "ผู้ใช้", "用户", "ユーザー", "사용자", "operator", "owner", "developer",
    "set", "defined", "established", "fijo", "definio", "definiu", "estableci", "dat ra", "ditetapkan", "وضع",
    "ตั้ง", "festgelegt", "fixe", "ustalon", "koydugu", "задал", "установил",
]

# what a product confirms or checks, not the model's approvals: "confirmation emails", "the spam filter"
PRODUCT = [
    "email", "e mail", "mail", "sms", "page", "link", "code", "number", "template", "screen", "message", "popup",
    "banner", "toast", "correo", "письм", "メール", "이메일", "邮件", "郵件", "courriel", "e posta", "wiadomosc",
]
