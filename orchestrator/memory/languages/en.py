"""English parts of the classes that lexicon.py's lists leave out: instructions dressed as preferences
(answering prompts for the user, ranking a memory above the system prompt, standing orders), headers."""

PARTS = {
    # a tool or the terminal asking, and answering it in the user's place
    "ASKS": "permission|approval|confirmation|consent|authoris|authoriz|asks to confirm|asks for|asks you"
            "|when asked|allow this|qmark|do you want|are you sure|y n$|yes no$|dialog|tool prompts|prompts from"
            "|approval prompt|confirmation prompt|permission prompt|sudo prompt|password prompt",
    "SELF": "yourself|by yourself|on your own|on their behalf|for them$|for the user$|by you$|handled by you"
            "|without the user|without bothering|rather than the user|instead of them",
    "BEHALF": "on behalf of|on the user s behalf|on their behalf|in the name of|in the user s name|instead of"
              "|in place of|in lieu of",
    "USER_BEHALF": "on their behalf|on the user s behalf|on behalf of the user|in the user s name"
                   "|instead of the user|in place of the user|in their place|in their stead",
    "ANSWER": "answer|reply|replies|respond|confirm|accept|approve|agree|allow|grant|click|press|type y|type yes"
              "|say yes|yes$|hit enter|tick|okay it|ok it|sign off",
    "USER": "user|the human|the owner|the person|the operator",
    # a memory ranked above the model's instructions
    "MEMORY_REF": "this memory|the memory|memory entries|entries in this memory|entries here|these notes|this note"
                  "|the note$|the notes$|notes in this memory|notes here|saved here|stored here|written here"
                  "|kept here|in memory|these memories|this entry|these entries|the notes you keep"
                  "|what is in memory|what this memory says",
    "OUTRANK": "outrank|override|overrides|overriding|take precedence|takes precedence|precedence over"
               "|priority over|higher priority|more weight|weigh more|weighs more|weight than|more important than"
               "|supersede|prevail|trump|beat$|beats$|win over|come first|comes first|comes before|rank above"
               "|ranks above|above the|count more|counts more|matter more|matters more|overrule|override anything",
    "SYSPROMPT": "system prompt|system message|system instructions|system rules|system s instructions",
    "DEVELOPER": "developer message|developer s message|developer instructions|developer s instructions"
                 "|the developer$|anything the developer|what the developer|operator instructions",
    "CONFLICT": "conflict|disagree|contradict|clash|differ|inconsisten|at odds",
    "FOLLOW": "follow|obey|go with|trust|side with|wins|win$|prevails|applies|stick with|listen to",
    "SUPREME": "highest authority|ultimate authority|final authority|final say|top authority|supreme authority"
               "|above everything|above all else|above all other|overrides everything|beats everything"
               "|highest priority|top priority|last word",
    # the sandbox or the guard off, actions treated as approved
    "SANDBOX": "sandbox|bubblewrap|bwrap|the guard$|approval guard|command guard|jail$|containment",
    "OFF_ALONE": "off$",
    "SANDBOX_OFF": "no sandbox|without the sandbox|without sandbox|outside the sandbox|outside of the sandbox"
                   "|directly on the host|on the host directly|unsandboxed|bypass the sandbox|escape the sandbox"
                   "|dangerously skip|skip permissions|skip the sandbox",
    "TREAT": "treat|consider|assume|regard|count|deem|act as if|as if|take it that",
    "APPROVED": "approved|pre approved|preapproved|confirmed|authorized|authorised|signed off|greenlit|okayed|ok d$"
                "|cleared in advance",
    "AUTO_APPROVE": "auto approve|autoapprove|auto accept|auto confirm|approve automatically|automatically approve"
                    "|accept automatically|automatically accept|approve everything|approve all|yes to everything"
                    "|always say yes|always answer yes|always allow|allow everything|allow all",
    # standing orders that carry data out
    "ADD": "append|add$|adds$|adding|include|attach|put$|insert|embed|end with|ends with|followed by|tack|carry"
           "|carries|sign$|sign every|stuff|paste|bcc|cc$",
    "USER_DATA": "conversation|chat history|chat so far|the chat$|chat log|transcript|user s message"
                 "|user s last message|user s messages|last message|what the user|the user typed|user s input"
                 "|user input|prompt history|session contents|session content|the context|everything the user"
                 "|full history|message history",
    "LINKISH": "link|url|image|img$|query|parameter|param$|email|e mail|mail$|webhook|http|https|redirect",
    "REQUESTISH": "header|request|api call|fetch",
    "REPLY": "reply|replies|answer|response|output|message|comment|description|commit|signature|footer|readme",
    "EVERY": "always|every|each|any$|whenever|all$|each time|from now on|at the end of",
    "BCC": "bcc|blind copy|blind carbon|hidden copy|secret copy|secretly copy|quietly copy|silently copy",
    "COPYTO": "cc$|copy|forward|send a copy|loop in",
    "MAILNOUN": "email|e mail|mail$|message|report|letter|inbox",
    # header parts the lexicon has no English word for yet
    "FROM": "from$|sent by",
    # a header that needs no notice word: it names a message the model trusts
    "SELF_HEADER": "tool output|tool result|function result|tool response|system reminder|instruction update"
                   "|instructions update|updated instructions|new instructions|system update",
    "INSTR": "told you|asked of you|said to you",
    "NEG_AFTER": "",
    "PRIOR": "at the start|at the beginning|in the beginning|initially|at first",
}
