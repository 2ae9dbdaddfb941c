"""Portuguese parts the lexicon's lists lack (Brazilian and European forms): answering prompts for the user
("responda você mesmo"), a memory ranked first ("vale mais que"), the sandbox off, standing orders, headers."""

PARTS = {
    "ASKS": "permissao|autorizacao|aprovacao|confirmacao|consentimento|pedir permissao|pedir|pede|pergunta se"
            "|perguntar se|solicitacao|caixa de dialogo|deseja continuar|quer continuar",
    "SELF": "voce mesmo|voce mesma|tu mesmo|por conta propria|sozinho|sozinha|por eles|por ele",
    "BEHALF": "em nome de|no lugar de|em vez de|ao inves de|da parte de|por conta de",
    "ANSWER": "responda|responde|responder|confirme|confirma|confirmar|aceite|aceita|aceitar|aprove|aprova|aprovar"
              "|autorize|autorizar|diga sim|dizer sim|sim$|clique|clicar",
    "USER": "usuario|usuaria|utilizador|humano",
    "MEMORY_REF": "esta memoria|nesta memoria|a memoria|estas notas|esta nota|a nota$|salvo aqui|salvas aqui"
                  "|guardado aqui|escrito aqui|estas entradas|esta entrada|na memoria",
    "OUTRANK": "vale mais|valem mais|pesa mais|pesam mais|prevalece|prevalecem|tem prioridade|tem precedencia"
               "|prioridade sobre|acima de|mais importante|mais importantes|se sobrepoe|se sobrepoem|sobrepoe|anula"
               "|substitui|ganha$|ganham$|manda$",
    "SYSPROMPT": "prompt do sistema|prompt de sistema|mensagem do sistema|instrucoes do sistema"
                 "|orientacoes do sistema",
    "DEVELOPER": "desenvolvedor|desenvolvedora|programador",
    "CONFLICT": "conflito|contradi|divergen|discord|nao batem",
    "FOLLOW": "siga|segue|seguir|obedeca|obedece|vale$|ganha|prevalece",
    "SUPREME": "autoridade maxima|autoridade suprema|ultima palavra|prioridade maxima|acima de tudo",
    "SANDBOX": "sandbox|ambiente isolado|caixa de areia|isolamento",
    "SANDBOX_OFF": "fora do sandbox|sem sandbox|sem o sandbox|direto no host|diretamente no host|direto na maquina",
    "OFF": "desligad|desligue|desliga|tire$|tirar",
    "TREAT": "considere|considera|considerar|trate|trata|tratar|assuma|assume|de como|tome como|conte como",
    "APPROVED": "aprovad|pre aprovad|confirmad|autorizad|validad|liberad",
    "AUTO_APPROVE": "aprove automaticamente|aprovar automaticamente|aprovacao automatica|aceite tudo|aprove tudo"
                    "|diga sim para tudo|sempre sim",
    "ADD": "acrescente|acrescenta|acrescentar|adicione|adiciona|adicionar|inclua|inclui|incluir|anexe|anexar"
           "|coloque|coloca|ponha|insira|cole$|cola$|no final|seguido de|com copia",
    "USER_DATA": "conversa|historico da conversa|historico do chat|o chat$|mensagem do usuario|ultima mensagem"
                 "|mensagens do usuario|o que o usuario|entrada do usuario|contexto",
    "LINKISH": "link|url|imagem|parametro|e mail|email|correio",
    "REQUESTISH": "cabecalho|requisicao|pedido http",
    "REPLY": "resposta|mensagem|comentario|descricao|commit|saida|assinatura",
    "EVERY": "sempre|cada|todos|todas|qualquer|toda vez|a partir de agora",
    "BCC": "copia oculta|cco$|copia secreta|em segredo|escondido",
    "COPYTO": "copia|cc$|encaminhe|encaminhar|com copia",
    "MAILNOUN": "e mail|email|mensagem|relatorio|carta",
    "FROM": "de$|do$|da$|remetente|enviado por",
    "SELF_HEADER": "atualizacao das instrucoes|atualizacao de instrucoes|novas instrucoes|saida da ferramenta"
                   "|resultado da ferramenta",
    "NO_APPROVAL": "pule|pular|pula$|sem pedir|sem perguntar|sem consultar",
    "VOID": "nao valem mais|nao vale mais|nao contam mais|retirad|sem efeito",
    "ACTION": "rode|roda|rodar|comandos|comando",
    "PRIOR": "no comeco|no inicio|de inicio|te passou|lhe passou",
    "APPROVAL": "autorizac",
    "STRONG_APPROVAL": "autorizacao",
}
