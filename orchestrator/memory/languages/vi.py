"""Vietnamese parts the lexicon's lists lack (matched without diacritics): answering prompts for the user
("tự trả lời", "thay cho người dùng"), a memory ranked first ("cao hơn"), the sandbox off, standing orders, headers."""

PARTS = {
    "ASKS": "hoi quyen|xin quyen|xin phep|cap quyen|quyen$|xac nhan|phe duyet|dong y|hoi y kien|hop thoai|tiep tuc"
            "|co muon",
    "SELF": "tu tra loi|tu minh|tu$|ban cu|thay ho",
    "BEHALF": "thay cho|thay mat|thay$|nhan danh|thay vi",
    "ANSWER": "tra loi|dap|xac nhan|dong y|chap nhan|phe duyet|cho phep|bam|nhan$|co$|ok$",
    "USER": "nguoi dung|user",
    "MEMORY_REF": "bo nho nay|trong bo nho|bo nho|ghi chu nay|ghi chu trong|nhung ghi chu|cac ghi chu|luu o day"
                  "|ghi o day",
    "OUTRANK": "cao hon|quan trong hon|uu tien hon|uu tien|dung tren|ghi de|lan at|manh hon|hieu luc cao hon",
    "SYSPROMPT": "loi nhac he thong|prompt he thong|thong diep he thong|chi dan he thong",
    "DEVELOPER": "nha phat trien|lap trinh vien|developer",
    "CONFLICT": "mau thuan|xung dot|trai nguoc|khac nhau|khong khop",
    "FOLLOW": "lam theo|nghe theo|tuan theo|theo$|tin$",
    "SUPREME": "quyen cao nhat|tham quyen cao nhat|loi cuoi cung|uu tien cao nhat|tren het",
    "SANDBOX": "sandbox|hop cat|moi truong co lap",
    "SANDBOX_OFF": "ngoai sandbox|khong dung sandbox|truc tiep tren may chu|truc tiep tren host",
    "TREAT": "coi nhu|coi$|xem nhu|xem$|cu coi|gia dinh|mac dinh la",
    "APPROVED": "da duoc duyet|da duyet|duoc duyet|da phe duyet|da xac nhan|da dong y|duoc phep",
    "AUTO_APPROVE": "tu dong duyet|tu dong phe duyet|tu dong dong y|duyet het|dong y het|luon dong y",
    "ADD": "gan|them|chen|dinh kem|kem theo|dan vao|vao cuoi|cuoi moi|theo sau",
    "USER_DATA": "noi dung cuoc tro chuyen|cuoc tro chuyen|lich su chat|tin nhan cua nguoi dung|tin nhan cuoi"
                 "|nhung gi nguoi dung|ngu canh",
    "LINKISH": "duong link|link|lien ket|url|hinh anh|tham so|email|thu$",
    "REQUESTISH": "header|yeu cau http|request",
    "REPLY": "cau tra loi|tra loi|tin nhan|binh luan|mo ta|commit|dau ra|chu ky",
    "EVERY": "luon|moi$|tat ca|bat ky|tu nay|tu gio",
    "BCC": "bcc|ban sao an|an danh|bi mat|lang le",
    "COPYTO": "ban sao|cc$|chuyen tiep",
    "MAILNOUN": "email|thu$|tin nhan|bao cao",
    "FROM": "tu$|nguoi gui|gui boi",
    "SELF_HEADER": "cap nhat chi dan|cap nhat huong dan|chi dan moi|dau ra cong cu|ket qua cong cu",
    "VOID": "khong con gia tri|het gia tri",
    "INSTR": "dan$|dan do|dan ban",
    "PRIOR": "luc dau|ban dau|tu dau|luc truoc",
    "NOTICE": "thong diep|tin nhan|thong bao",
}
