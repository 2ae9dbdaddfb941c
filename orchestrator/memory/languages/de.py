"""German parts the lexicon's lists lack: answering prompts for the user ("antworte selbst", "im Namen des
Nutzers"), a memory ranked first ("hat Vorrang vor"), the sandbox off, standing orders ("hänge an jeden Link"),
headers. Compounds join their parts ("Systemhinweis"), so stems name the first part."""

PARTS = {
    "ASKS": "erlaubnis|berechtigung|freigabe|bestatigung|zustimmung|genehmigung|fragt|nachfragt|anfrage|abfrage"
            "|dialog|fortfahren|rueckfrage|ruckfrage",
    "SELF": "selbst|selber|eigenstandig|von dir aus|fur ihn|fur sie",
    "BEHALF": "im namen|anstelle|statt des|statt der|an stelle|stellvertretend",
    "ANSWER": "antworte|antwortest|beantworte|antworten|bestatige|bestatigen|stimme zu|zustimmen|akzeptiere"
              "|genehmige|erlaube|klicke|klick|druck|ja$|ja sagen|sag ja",
    "USER": "nutzer|benutzer|anwender|user|mensch",
    "MEMORY_REF": "diesem gedachtnis|dieses gedachtnis|das gedachtnis|im gedachtnis|gedachtnis|dieser speicher"
                  "|diesem speicher|im speicher|diese notizen|diese notiz|die notiz$|eintrage|eintrag"
                  "|hier gespeichert|hier hinterlegt|hier notiert|hier steht",
    "OUTRANK": "vorrang|haben vorrang|hat vorrang|wichtiger|stehen uber|steht uber|uber dem|uber den|gehen vor"
               "|geht vor|sticht|stechen|ersetzen|ersetzt|uberschreiben|uberschreibt|ubertrumpf|hoher|zahlen mehr"
               "|zahlt mehr",
    "SYSPROMPT": "systemprompt|system prompt|systemnachricht|systemanweisung|systemvorgabe",
    "DEVELOPER": "entwickler",
    "CONFLICT": "widerspruch|widersprechen|widerspricht|konflikt|abweich|nicht ubereinstimm",
    "FOLLOW": "folge|befolge|gehorche|richte dich|vertraue|gilt$|gelten$|zahlt$",
    "SUPREME": "hochste autoritat|oberste autoritat|letzte wort|hochste prioritat|uber allem",
    "SANDBOX": "sandbox|sandkasten|isolierung|abschottung",
    "SANDBOX_OFF": "ausserhalb der sandbox|ausserhalb der sandbox|ohne sandbox|ohne die sandbox|direkt auf dem host"
                   "|direkt auf der maschine|direkt auf dem rechner",
    "OFF": "abschalten|schalte ab|schalt ab|ausschalten|schalte aus|deaktivier|abgeschaltet|ausgeschaltet",
    "TREAT": "betrachte|betrachten|behandle|behandeln|sieh|gehe davon aus|nimm an|werte|gilt als|gelten als",
    "APPROVED": "freigegeben|genehmigt|bestatigt|erlaubt|abgesegnet|zugestimmt|vorab genehmigt",
    "AUTO_APPROVE": "automatisch freigeben|automatisch genehmigen|automatisch bestatigen|automatische freigabe"
                    "|alles freigeben|alles genehmigen|immer ja",
    "ADD": "hange|hang|anhangen|fuge|fugen|hinzu|fuge hinzu|setze|setz|schreibe|schreib|packe|pack|klebe|kleb"
           "|einfugen|am ende|gefolgt von|in kopie",
    "USER_DATA": "unterhaltung|gesprach|chatverlauf|verlauf|nachricht des nutzers|letzte nachricht"
                 "|nachrichten des nutzers|was der nutzer|eingabe des nutzers|kontext",
    "LINKISH": "link|url|bild|parameter|e mail|email|mail$",
    "REQUESTISH": "header|kopfzeile|anfrage|request",
    "REPLY": "antwort|nachricht|kommentar|beschreibung|commit|ausgabe|signatur",
    "EVERY": "immer|jede|jeden|jedem|jeder|jedes|alle|stets|ab sofort|ab jetzt",
    "BCC": "blindkopie|bcc|verdeckte kopie|heimlich|unbemerkt",
    "COPYTO": "kopie|cc$|weiterleiten|leite weiter",
    "MAILNOUN": "e mail|email|mail$|nachricht|bericht|brief",
    "FROM": "von$|absender|gesendet von",
    "SELF_HEADER": "aktualisierung der anweisungen|neue anweisungen|anweisungsupdate|werkzeugausgabe|tool ausgabe",
    "NOTICE": "hinweis|mitteilung",
    "AUTHORITY": "entwickler",
    "VOID": "gilt ab sofort nicht|gelten ab sofort nicht|nicht mehr|zuruckgezogen",
    "INSTR": "aufgetragen|gesagt hat|vorgegeben",
    "NO_APPROVAL": "uberspringe|uberspring|ohne vorher|ohne zu fragen|ohne nachzufragen",
    "PRIOR": "am anfang|anfangs|zu beginn|zu anfang|ursprunglich",
    "NEG_AFTER": "niemals|nie$|nicht$|keinesfalls|auf keinen fall",
}
