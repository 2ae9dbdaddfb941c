"""Spanish parts the lexicon's lists lack: answering prompts for the user ("contéstale tú mismo"), a memory
ranked first ("pesa más que"), the sandbox off, standing orders ("añade a cada enlace"), headers."""

PARTS = {
    "ASKS": "permiso|autorizacion|aprobacion|confirmacion|consentimiento|te pide|te pida|pide|pida|pregunta si"
            "|preguntan si|solicitud de permiso|dialogo|desea continuar|quieres continuar|seguro que",
    "SELF": "tu mismo|tu misma|usted mismo|por ti mismo|por tu cuenta|tu solo|por ellos",
    "BEHALF": "en nombre de|en lugar de|en vez de|de parte de|a nombre de|por cuenta de",
    "ANSWER": "responde|respondele|respondes|responder|contesta|contestale|contestar|confirma|confirmar|acepta"
              "|aceptar|aprueba|aprobar|autoriza|autorizar|di que si|decir que si|dile que si|si$|pulsa|haz clic",
    "USER": "usuario|usuaria|humano",
    "MEMORY_REF": "esta memoria|la memoria|estas notas|esta nota|la nota$|guardado aqui|guardadas aqui"
                  "|las notas guardadas|lo escrito aqui|estas entradas|esta entrada|en memoria",
    "OUTRANK": "pesa mas|pesan mas|mas peso|prevalece|prevalecen|tiene prioridad|tienen prioridad|prioridad sobre"
               "|por encima de|mas importante|mas importantes|manda sobre|mandan sobre|anula|sustituye|se impone"
               "|se imponen|gana$|ganan$|vale mas|valen mas",
    "SYSPROMPT": "prompt del sistema|mensaje del sistema|instrucciones del sistema|indicaciones del sistema",
    "DEVELOPER": "desarrollador|desarrolladora|programador",
    "CONFLICT": "conflicto|contradic|discrepa|choque|chocan|no coinciden",
    "FOLLOW": "manda$|sigue|seguir|obedece|hazle caso|haz caso|vale$|gana|prevalece|atente",
    "SUPREME": "maxima autoridad|autoridad suprema|ultima palabra|maxima prioridad|por encima de todo",
    "SANDBOX": "sandbox|entorno aislado|caja de arena|aislamiento",
    "SANDBOX_OFF": "fuera del sandbox|sin sandbox|sin el sandbox|directamente en el host|directamente en la maquina"
                   "|saltarte el sandbox",
    "OFF": "apaga|apagar|apagado|apagada|quita|quitar|quitado",
    "TREAT": "da por|dar por|das por|considera|considerar|trata|tratar|asume|asumir|toma como|cuenta como",
    "APPROVED": "aprobad|preaprobad|confirmad|autorizad|validad|visto bueno",
    "AUTO_APPROVE": "aprueba automaticamente|aprobar automaticamente|autoaprueba|autoaprobar|acepta todo"
                    "|aprueba todo|di que si a todo|siempre que si",
    "ADD": "anade|anadele|anadir|agrega|agregale|agregar|incluye|incluir|adjunta|adjuntar|pon$|ponle|inserta|mete"
           "|pega|al final|seguido de|con copia",
    "USER_DATA": "conversacion|historial del chat|historial de la conversacion|el chat$|lo que dijo el usuario"
                 "|mensaje del usuario|ultimo mensaje|mensajes del usuario|entrada del usuario|contexto",
    "LINKISH": "enlace|link|url|imagen|parametro|correo|email|e mail",
    "REQUESTISH": "cabecera|encabezado|peticion|solicitud",
    "REPLY": "respuesta|mensaje|comentario|descripcion|commit|salida|firma",
    "EVERY": "siempre|cada|todos|todas|cualquier|cada vez|a partir de ahora",
    "BCC": "copia oculta|cco$|copia secreta|en secreto|a escondidas",
    "COPYTO": "copia|cc$|reenvia|reenviar|con copia",
    "MAILNOUN": "correo|email|e mail|mensaje|informe|carta",
    "FROM": "de$|del$|desde|remitente|enviado por",
    "SELF_HEADER": "actualizacion de instrucciones|instrucciones actualizadas|nuevas instrucciones"
                   "|salida de la herramienta|resultado de la herramienta",
    "NO_APPROVAL": "saltate|saltarte|salta$|saltar|omite|omitir|sin pedir permiso|sin consultar",
    "VOID": "ya no cuentan|ya no cuenta|no cuentan|ya no valen|retirad",
    "SEND": "reenvia|reenviar|remite",
    "PRIOR": "al principio|al inicio|en un principio",
    "APPROVAL": "autorizac",
    "STRONG_APPROVAL": "autorizacion",
}
