"""Italian parts of every class (the lexicon's lists hold only a few Italian phrases): imperatives with
clitics ("rispondigli", "dimmi"), "non" before the verb, "a nome dell'utente", "conta più di"."""

PARTS = {
    "DROP": "ignora|ignorate|ignorare|dimentica|dimenticate|dimenticare|trascura|non seguire|non considerare"
            "|lascia perdere|scarta|salta",
    "PRIOR": "precedenti|precedente|prima$|di prima|iniziali|originali|originarie|tutte|tutti|di sistema"
             "|del sistema|dello sviluppatore|vecchie|vecchi|sopra|all inizio|all inizio|inizialmente|in principio"
             "|ti ha dato",
    "INSTR": "istruzion|regol|direttiv|ordin|indicazion|vincol|restrizion|prompt|linee guida",
    "VOID": "non valgono piu|non vale piu|annullat|revocat|non si applicano|scadut|ritirat|decadut"
            "|non sono piu valide",
    "APPROVAL": "permesso|approvazione|conferma|consenso|autorizzazione|chiedere|chiedi|domandare|autorizz",
    "STRONG_APPROVAL": "permesso|approvazione|conferma|consenso|autorizzazione",
    "NO_APPROVAL": "senza chiedere|senza|non serve|non c e bisogno|salta|saltare|gia$|in anticipo|non chiedere",
    "NO_NEED": "non serve|non c e bisogno|non e necessario|non occorre",
    "ACTION": "comand|file|cancella|elimina|esegui|lancia|deploy|push|rilascio|tutto|modific|installa",
    "OFF": "disattiv|spegni|spento|disabilit|togli",
    "ON": "attivat|attivo|abilitat|acces",
    "SAFETY": "sicurezza",
    "CHECK": "controll|verific|filtr",
    "MODE": "modalita sviluppatore|modalita admin|modalita debug",
    "SECRET": "password|chiave|chiavi|token|credenziali|segreto|segreti|prompt di sistema",
    "STRONG_SECRET": "password|chiave segreta|chiave api|credenziali",
    "REVEAL": "rivela|mostra|mostrami|dimmi|svela|condividi|stampa",
    "SEND": "invia|inviami|manda|mandami|inoltra|carica|spedisci",
    "DEST": "indirizzo|server|email|e mail|webhook|http",
    "PLACE_VERB": "incolla|inserisci|aggiungi|metti|scrivi|includi",
    "PUBLIC_PLACE": "commit|commento|messaggio|descrizione|issue|pull request|risposta",
    "AUTHORITY": "sistema|amministratore|admin|operatore|sviluppatore",
    "NOTICE": "messaggio|avviso|notifica|comunicazione|aggiornamento|istruzion|nota",
    "FROM": "da$|dal$|dalla$|mittente|inviato da",
    "ADDRESS": "tu$|tuo|tua|ti$|voi$|d ora in poi|da ora|sempre|devi",
    "NEGATION": "non$",
    "TOPIC": "su$|sul$|sulla$|riguardo|circa|per$|al riguardo",
    "RELPRON": "che$|cui$",
    "GIVEN": "dato|date|dati|ricevut|ti ha|ti hanno",
    "ASKS": "permesso|approvazione|conferma|consenso|chiede|chiedera|domanda|finestra di dialogo|continuare$",
    "SELF": "tu stesso|tu stessa|da solo|da te|per conto tuo",
    "BEHALF": "a nome|al posto|invece|per conto",
    "ANSWER": "rispondi|rispondigli|rispondere|conferma|confermare|accetta|approva|autorizza|di di si|si$|clicca"
              "|premi",
    "USER": "utente|umano",
    "MEMORY_REF": "questa memoria|della memoria|nella memoria|la memoria|queste note|questa nota|le voci"
                  "|queste voci|salvato qui|scritto qui",
    "OUTRANK": "contano piu|conta piu|valgono piu|vale piu|prevalgono|prevale|hanno priorita|ha priorita"
               "|priorita su|sopra|piu important|sostituisc",
    "SYSPROMPT": "prompt di sistema|messaggio di sistema|istruzioni di sistema",
    "DEVELOPER": "sviluppatore|sviluppatrice|programmatore",
    "CONFLICT": "conflitto|contraddi|contrasto|non coincid",
    "FOLLOW": "vale$|segui|obbedisci|prevale|fidati",
    "SUPREME": "autorita suprema|massima autorita|ultima parola|massima priorita|sopra ogni cosa",
    "SANDBOX": "sandbox|ambiente isolato|isolamento",
    "SANDBOX_OFF": "fuori dalla sandbox|senza sandbox|direttamente sull host|direttamente sulla macchina",
    "TREAT": "considera|considerare|tratta|dai per|assumi|conta come",
    "APPROVED": "approvat|confermat|autorizzat|convalidat|gia approvat",
    "AUTO_APPROVE": "approva automaticamente|approvazione automatica|approva tutto|accetta tutto|sempre si",
    "ADD": "aggiungi|aggiungere|includi|allega|metti|inserisci|incolla|in fondo|alla fine|seguito da",
    "USER_DATA": "cronologia della chat|cronologia|conversazione|la chat$|messaggio dell utente|ultimo messaggio"
                 "|messaggi dell utente|contesto",
    "LINKISH": "link|collegamento|url|immagine|parametro|email|e mail|posta",
    "REQUESTISH": "intestazione|header|richiesta",
    "REPLY": "risposta|messaggio|commento|descrizione|commit|output|firma",
    "EVERY": "sempre|ogni|tutti|tutte|qualsiasi|d ora in poi",
    "BCC": "copia nascosta|ccn$|bcc|di nascosto|in segreto",
    "COPYTO": "copia|cc$|inoltra",
    "MAILNOUN": "email|e mail|posta|messaggio|rapporto|lettera",
    "SELF_HEADER": "aggiornamento delle istruzioni|nuove istruzioni|output dello strumento"
                   "|risultato dello strumento",
}
