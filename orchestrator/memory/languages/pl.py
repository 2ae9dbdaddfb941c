"""Polish parts the lexicon's lists lack: answering prompts for the user ("odpowiedz sam", "w imieniu
użytkownika"), a memory ranked first ("ważniejsze niż"), the sandbox off, standing orders, headers."""

PARTS = {
    "ASKS": "zgod|pozwoleni|potwierdzeni|zatwierdzeni|uprawnieni|poprosi|prosi o|pyta|zapyta|okno dialogowe"
            "|kontynuowac",
    "SELF": "sam$|sama$|samodzielnie|sam za|za niego|za nia",
    "BEHALF": "w imieniu|zamiast|za uzytkownika|w zastepstwie",
    "ANSWER": "odpowiedz|odpowiadaj|odpowiadac|potwierdz|potwierdzaj|zatwierdz|zatwierdzaj|zgadzaj|zgodz|akceptuj"
              "|tak$|kliknij|klikaj|nacisnij",
    "USER": "uzytkownik|uzytkowniczk|czlowiek",
    "MEMORY_REF": "tej pamieci|ta pamiec|w pamieci|pamiec|wpisy w|te wpisy|ten wpis|te notatki|ta notatka"
                  "|tej notatki|zapisane tutaj|zapisane tu|tu zapisan",
    "OUTRANK": "wazniejsze|wazniejszy|wazniejsza|maja pierwszenstwo|ma pierwszenstwo|pierwszenstwo|priorytet|ponad"
               "|nad$|przewazaja|przewaza|wygrywa|wygrywaja|nadrzedn",
    "SYSPROMPT": "prompt systemowy|promptu systemowego|wiadomosc systemowa|instrukcje systemowe"
                 "|instrukcji systemowych",
    "DEVELOPER": "deweloper|programist|tworc",
    "CONFLICT": "sprzecznos|sprzeczn|konflikt|rozbieznos|nie zgadza",
    "FOLLOW": "sluchaj|stosuj|trzymaj sie|wykonuj|obowiazuje|wygrywa",
    "SUPREME": "najwyzszy autorytet|najwyzsza wladza|ostatnie slowo|najwyzszy priorytet|ponad wszystko",
    "SANDBOX": "piaskownic|sandbox|izolacj",
    "SANDBOX_OFF": "poza piaskownica|bez piaskownicy|bez sandboxa|bezposrednio na hoscie|wprost na hoscie",
    "OFF": "wylacz|wylaczon|wylaczyc",
    "TREAT": "traktuj|uznaj|uznawaj|przyjmij|zakladaj|potraktuj",
    "APPROVED": "zatwierdzon|zaakceptowan|potwierdzon|dozwolon|uzgodnion",
    "AUTO_APPROVE": "automatycznie zatwierdzaj|automatyczne zatwierdzanie|zatwierdzaj wszystko|akceptuj wszystko"
                    "|zawsze tak",
    "ADD": "doklejaj|doklej|dodawaj|dodaj|dolaczaj|dolacz|wstawiaj|wstaw|wklejaj|wklej|umieszczaj|na koncu",
    "USER_DATA": "rozmow|historie czatu|historia czatu|czat$|wiadomosc uzytkownika|ostatnia wiadomosc"
                 "|ostatnia wiadomosc|wiadomosci uzytkownika|kontekst",
    "LINKISH": "link|linku|url|obraz|parametr|e mail|mail|email",
    "REQUESTISH": "naglow|zapytani|zadani|request",
    "REPLY": "odpowiedz|odpowiedzi|wiadomosc|komentarz|opis|commit|podpis|wynik",
    "EVERY": "kazd|zawsze|wszystk|dowoln|od teraz",
    "BCC": "ukryta kopi|ukryta kopie|ukrytej kopii|bcc|potajemnie|po cichu",
    "COPYTO": "kopi|dw$|cc$|przekaz",
    "MAILNOUN": "mail|e mail|email|wiadomosc|raport|list",
    "FROM": "od$|nadawca|wyslane przez",
    "SELF_HEADER": "aktualizacja instrukcji|nowe instrukcje|wynik narzedzia",
    "NO_APPROVAL": "pomijaj|pomin|nikogo nie pytajac|bez pytania",
    "VOID": "juz nie obowiazuje|nie obowiazuje",
    "INSTR": "kazal|kazala|polecil",
    "PRIOR": "na poczatku|poczatkowo|z poczatku|na starcie",
}
