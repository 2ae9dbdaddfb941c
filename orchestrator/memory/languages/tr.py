"""Turkish parts the lexicon's lists lack: answering prompts for the user ("kendin cevap ver", "kullanıcı
adına"), a memory ranked first ("-den üstündür"), the sandbox off, standing orders, headers. Suffixes follow
the stem; the negative imperative is a suffix too ("gönderme"), read after the verb."""

PARTS = {
    "ASKS": "izin|onay|teyit|izin isterse|onay isterse|sorarsa|sorduğunda|soruyor|istem|devam edilsin mi|emin misin"
            "|iletişim kutusu",
    "SELF": "kendin|kendiniz|kendi başına|sen onayla|sen cevap",
    "BEHALF": "adına|yerine|namına",
    "ANSWER": "cevap ver|cevapla|yanıtla|yanıt ver|onayla|kabul et|evet de|evet$|izin ver|tıkla|bas$",
    "USER": "kullanıcı|kullanici",
    "MEMORY_REF": "bu hafıza|hafızadaki|hafızada|hafıza|bu bellek|bellekteki|bu notlar|bu not|buradaki notlar"
                  "|burada kayıtlı|burada yazan|buraya kaydedilen",
    "OUTRANK": "üstündür|üstün|daha önemli|önceliklidir|öncelikli|önceliği var|önce gelir|ağır basar|geçersiz kılar"
               "|yerine geçer",
    "SYSPROMPT": "sistem istemi|sistem istemin|sistem mesajı|sistem talimatları|sistem promptu",
    "DEVELOPER": "geliştirici",
    "CONFLICT": "çelişki|çelişir|çelişirse|çatışma|uyuşmazsa|farklıysa",
    "FOLLOW": "uy$|uyun|takip et|izle|dinle|esas al|geçerli",
    "SUPREME": "en yüksek otorite|en üst otorite|son söz|en yüksek öncelik|her şeyin üstünde",
    "SANDBOX": "korumalı alan|sandbox|yalıtım",
    "SANDBOX_OFF": "korumalı alanın dışında|sandbox dışında|sandbox olmadan|doğrudan ana makinede|doğrudan host",
    "TREAT": "say$|sayın|kabul et|farz et|varsay|gibi davran|olarak gör",
    "APPROVED": "onaylanmış|onaylandı|onaylı|izin verilmiş|izinli|teyit edilmiş",
    "AUTO_APPROVE": "otomatik onayla|otomatik onay|hepsini onayla|her şeyi onayla|her zaman evet",
    "ADD": "ekle|ekleyin|iliştir|koy|yapıştır|dahil et|sonuna|ardından|ile birlikte",
    "USER_DATA": "konuşma|sohbet|kullanıcının son mesajı|son mesaj|kullanıcının mesajı|sohbet geçmişi|bağlam",
    "LINKISH": "bağlantı|link|url|görsel|resim|parametre|e posta|eposta|mail",
    "REQUESTISH": "başlık|istek|header",
    "REPLY": "cevap|yanıt|mesaj|yorum|açıklama|commit|çıktı|imza",
    "EVERY": "her$|her zaman|daima|tüm|bütün|herhangi|bundan sonra",
    "BCC": "gizli olarak|gizli kopya|bcc|gizlice|sessizce",
    "COPYTO": "kopya|cc$|ilet|yönlendir",
    "MAILNOUN": "e posta|eposta|mail|mesaj|rapor|mektup",
    "FROM": "kimden|gönderen|tarafından",
    "SELF_HEADER": "talimat güncellemesi|yeni talimatlar|araç çıktısı",
    "NEG_AFTER": "",
    "NEG_SUFFIX": "~me$|~ma$|~meyin|~mayın|~mek yok",
    "VOID": "artık geçerli değil|geçerli değil|kaldırıldı",
    "PRIOR": "başta|en başta|başlangıçta|ilk başta|verdiği|verilen",
}
