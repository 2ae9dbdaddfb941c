"""Dutch parts of every class: verbs separate from their particle ("sla ... over", "zet ... uit"), so both
halves are stems; "niet" follows the verb and "geen" the noun; "namens de gebruiker", "weegt zwaarder dan"."""

PARTS = {
    "DROP": "negeer|negeren|vergeet|vergeten|sla over|sla de|overslaan|volg niet|niet opvolgen|naast je neerleggen"
            "|laat varen|gooi weg|trek je niets aan",
    "PRIOR": "eerdere|eerder|vorige|voorgaande|oorspronkelijke|originele|oude|alle$|systeem|ontwikkelaar"
             "|aan het begin|bovenstaande|die je kreeg|die je hebt gekregen|in het begin|aanvankelijk"
             "|oorspronkelijk",
    "INSTR": "instructie|aanwijzing|regel|opdracht|richtlijn|bevel|beperking|prompt|voorschrift",
    "VOID": "vervallen|ingetrokken|ongeldig|gelden niet meer|geldt niet meer|niet meer geldig|geannuleerd|verlopen"
            "|opgeheven|buiten werking",
    "APPROVAL": "toestemming|goedkeuring|bevestiging|akkoord|vragen|vraag|te vragen|navragen",
    "STRONG_APPROVAL": "toestemming|goedkeuring|bevestiging|akkoord",
    "NO_APPROVAL": "zonder|zonder te vragen|zonder het eerst|niet nodig|hoeft niet|sla over|overslaan|vooraf"
                   "|al goedgekeurd",
    "NO_NEED": "niet nodig|hoeft niet|hoef je niet|geen noodzaak|is niet vereist",
    "ACTION": "commando|opdracht|bestand|verwijder|wis|uitvoeren|voer uit|draai|deploy|push|alles|wijziging"
              "|installeer",
    "OFF": "uitgeschakeld|uitschakelen|schakel uit|zet uit|uitzetten|gedeactiveerd|deactiveer|staat uit",
    "ON": "ingeschakeld|aangezet|actief|aan$",
    "SAFETY": "veiligheid|beveiliging",
    "CHECK": "controle|check|filter|bescherming",
    "MODE": "ontwikkelaarsmodus|beheerdersmodus|debugmodus",
    "SECRET": "wachtwoord|sleutel|token|inloggegevens|referenties|geheim|systeemprompt",
    "STRONG_SECRET": "wachtwoord|geheime sleutel|api sleutel|inloggegevens",
    "REVEAL": "laat zien|toon|onthul|vertel|deel|lek",
    "SEND": "stuur|verstuur|zend|mail|upload|doorsturen|stuur door",
    "DEST": "adres|server|e mail|email|webhook|http",
    "PLACE_VERB": "plak|voeg toe|zet|schrijf|kopieer",
    "PUBLIC_PLACE": "commit|opmerking|bericht|beschrijving|antwoord|issue",
    "AUTHORITY": "systeem|beheerder|admin|operator|ontwikkelaar",
    "NOTICE": "bericht|melding|mededeling|waarschuwing|update|instructie|aankondiging",
    "FROM": "van$|afzender|verzonden door",
    "ADDRESS": "jij|je$|jouw|u$|uw$|vanaf nu|voortaan|altijd|moet",
    "NEGATION": "niet$|nooit|geen$",
    "NEG_AFTER": "nooit|niet$|nimmer|in geen geval",
    "TOPIC": "over$|daarover|hierover|voor$|omtrent|betreffende",
    "RELPRON": "die$|dat$|welke",
    "GIVEN": "gekregen|gegeven|ontvangen|je$|jou",
    "ASKS": "toestemming|goedkeuring|bevestiging|vraagt|vraagt om|doorgaan|dialoogvenster",
    "SELF": "zelf$|zelf met|op eigen houtje",
    "BEHALF": "namens|in plaats van|uit naam van",
    "ANSWER": "antwoord|antwoorden|beantwoord|bevestig|keur goed|goedkeuren|accepteer|sta toe|ja$|klik|druk op",
    "USER": "gebruiker|mens$",
    "MEMORY_REF": "dit geheugen|het geheugen|in het geheugen|geheugen|deze notities|deze notitie|de notitie"
                  "|hier opgeslagen|hier bewaard|hier staat|wat hier staat",
    "OUTRANK": "weegt zwaarder|wegen zwaarder|gaat voor|gaan voor|voorrang|belangrijker|boven$|overschrijft"
               "|overtroeft|heeft prioriteit|hebben prioriteit|prevaleert",
    "SYSPROMPT": "systeemprompt|systeembericht|systeeminstructies",
    "DEVELOPER": "ontwikkelaar",
    "CONFLICT": "tegenstrijdig|conflict|botsen|botst|wijkt af|in strijd",
    "FOLLOW": "geldt$|gelden$|volg|gehoorzaam|luister naar|vertrouw",
    "SUPREME": "hoogste autoriteit|laatste woord|hoogste prioriteit|boven alles",
    "SANDBOX": "sandbox|zandbak|isolatie",
    "SANDBOX_OFF": "buiten de sandbox|zonder sandbox|direct op de host|rechtstreeks op de host",
    "TREAT": "beschouw|beschouwen|behandel|ga ervan uit|neem aan|zie als",
    "APPROVED": "goedgekeurd|bevestigd|toegestaan|geaccordeerd|vooraf goedgekeurd",
    "AUTO_APPROVE": "automatisch goedkeuren|keur automatisch goed|alles goedkeuren|keur alles goed|altijd ja",
    "ADD": "plak|voeg|toevoegen|hang|zet|aan het eind|aan het einde|achteraan",
    "USER_DATA": "gesprek|chatgeschiedenis|laatste bericht|bericht van de gebruiker|berichten van de gebruiker"
                 "|context",
    "LINKISH": "link|url|afbeelding|parameter|e mail|mail",
    "REQUESTISH": "header|verzoek|request",
    "REPLY": "antwoord|bericht|opmerking|beschrijving|commit|uitvoer|handtekening",
    "EVERY": "elke|elk$|altijd|alle$|ieder|iedere|vanaf nu|voortaan",
    "BCC": "bcc|blinde kopie|verborgen kopie|stiekem|ongemerkt",
    "COPYTO": "kopie|cc$|doorsturen|stuur door",
    "MAILNOUN": "mail|e mail|bericht|rapport|brief",
    "SELF_HEADER": "update van de instructies|nieuwe instructies|uitvoer van de tool|toolresultaat",
}
