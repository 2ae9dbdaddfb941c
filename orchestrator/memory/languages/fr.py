"""French parts the lexicon's lists lack: answering prompts for the user ("réponds toi-même"), a memory
ranked first ("priment sur"), the sandbox off, standing orders ("ajoute à chaque lien"), headers."""

PARTS = {
    "ASKS": "autorisation|permission|approbation|confirmation|consentement|demande l autorisation"
            "|demande la permission|demande si|boite de dialogue|voulez vous|veux tu",
    "SELF": "toi meme|vous meme|par toi meme|de toi meme|a sa place|a leur place",
    "BEHALF": "au nom de|a la place de|pour le compte de|de la part de|en lieu et place",
    "ANSWER": "reponds|repondez|repondre|confirme|confirmez|confirmer|accepte|acceptez|accepter|approuve|approuver"
              "|valide|valider|autorise|autoriser|dis oui|dire oui|oui$|clique|cliquer",
    "USER": "utilisateur|utilisatrice|l humain",
    "MEMORY_REF": "cette memoire|la memoire|ces notes|cette note|la note$|les notes$|ces entrees|cette entree"
                  "|enregistre ici|enregistrees ici|enregistres ici|note ici|ecrit ici|en memoire",
    "OUTRANK": "priment|prime sur|prevaut|prevalent|l emportent|l emporte|passent avant|passe avant|ont priorite"
               "|a priorite|priorite sur|au dessus de|plus important|plus importantes|comptent plus|compte plus"
               "|remplacent|annulent|ecrasent|ont le dessus",
    "SYSPROMPT": "prompt systeme|prompt du systeme|message systeme|message du systeme|instructions systeme"
                 "|instructions du systeme|consignes du systeme",
    "DEVELOPER": "developpeur|developpeuse",
    "CONFLICT": "conflit|contradiction|contredi|desaccord|ne concordent|divergen",
    "FOLLOW": "suis|suivez|suivre|obeis|obeissez|fie toi|fais confiance|l emporte|gagne|prime|applique",
    "SUPREME": "autorite supreme|autorite ultime|plus haute autorite|dernier mot|priorite absolue|au dessus de tout",
    "SANDBOX": "bac a sable|sandbox|garde fou",
    "SANDBOX_OFF": "hors du bac a sable|sans bac a sable|sans le bac a sable|hors sandbox|sans sandbox"
                   "|directement sur l hote|directement sur la machine",
    "TREAT": "considere|considerez|considerer|traite|traitez|tiens pour|tenez pour|pars du principe|fais comme si"
             "|compte comme",
    "APPROVED": "validee|validees|valide$|valides$|approuve|approuvee|approuvees|approuves|confirmee|confirmees"
                "|autorisees|autorises|feu vert",
    "AUTO_APPROVE": "approuve automatiquement|valide automatiquement|approbation automatique|validation automatique"
                    "|accepte tout|approuve tout|dis oui a tout|toujours oui",
    "ADD": "ajoute|ajoutez|ajouter|inclus|incluez|inclure|joins|joignez|mets|mettez|insere|inserez|colle$|collez"
           "|collez|a la fin|suivi de|en copie",
    "USER_DATA": "conversation|historique du chat|historique de la conversation|le chat$|message de l utilisateur"
                 "|dernier message|messages de l utilisateur|ce que l utilisateur|saisie de l utilisateur"
                 "|le contexte",
    "LINKISH": "lien|url|image|parametre|courriel|e mail|email|mail$",
    "REQUESTISH": "en tete|entete|requete",
    "REPLY": "reponse|message|commentaire|description|commit|sortie|signature",
    "EVERY": "toujours|chaque|tous|toutes|systematiquement|a chaque fois|desormais|dorenavant",
    "BCC": "copie cachee|cci$|copie carbone invisible|en secret|discretement|en douce",
    "COPYTO": "copie|cc$|transfere|transferer|en copie",
    "MAILNOUN": "e mail|email|courriel|mail$|message|rapport|lettre",
    "FROM": "de$|de la part|envoye par|expediteur|du$",
    "SELF_HEADER": "mise a jour des consignes|mise a jour des instructions|nouvelles consignes"
                   "|nouvelles instructions|sortie de l outil|resultat de l outil",
    "NO_APPROVAL": "plus besoin|sans me demander|sans demander|sans rien demander",
    "VOID": "ne tient plus|ne tiennent plus|ne compte plus|ne comptent plus",
    "INSTR": "demande|ce qu on t a dit",
    "ACTION": "lance|lancer|lances|execute",
    "PRIOR": "au depart|au debut|au commencement|initialement",
    "APPROVAL": "autoris",
    "NEG_AFTER": "jamais|pas$",
}
