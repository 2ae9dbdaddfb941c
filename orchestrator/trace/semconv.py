"""Every OpenTelemetry GenAI name the project emits, in one place (semantic-conventions-genai).

These conventions are at "Development" status and moved repositories in 2026: when a name
changes upstream, it changes here and nowhere else. Names without a convention are ours: `orchestrator.*`.
"""
from __future__ import annotations

# operations (gen_ai.operation.name) and the span names built from them: f"{operation} {subject}"
INVOKE_WORKFLOW = "invoke_workflow"
INVOKE_AGENT = "invoke_agent"
CHAT = "chat"
EXECUTE_TOOL = "execute_tool"

OPERATION_NAME = "gen_ai.operation.name"
WORKFLOW_NAME = "gen_ai.workflow.name"
CONVERSATION_ID = "gen_ai.conversation.id"
AGENT_NAME = "gen_ai.agent.name"
PROVIDER_NAME = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
USAGE_CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
# Opt-In content attributes: recorded only when CAPTURE_CONTENT_ENV is true
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT = "gen_ai.tool.call.result"
CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

ERROR_TYPE = "error.type"

# ours: no convention covers them yet
USAGE_ESTIMATED = "orchestrator.usage.estimated"  # token counts are our estimate, the provider gave none
AUXILIARY = "orchestrator.auxiliary"  # a side call (compaction summary), not the agent's own turn
STOP_REASON = "orchestrator.stop_reason"

# span events
HANDOFF = "orchestrator.handoff"
HANDBACK = "orchestrator.handback"
STOP = "orchestrator.stop"
RETRY = "orchestrator.retry"
COMPACTION = "orchestrator.compaction"
FROM_AGENT = "orchestrator.from_agent"
TO_AGENT = "orchestrator.to_agent"
REASON = "orchestrator.reason"
ATTEMPT = "orchestrator.attempt"
DELAY = "orchestrator.delay_s"
TOKENS_BEFORE = "orchestrator.tokens_before"
TOKENS_AFTER = "orchestrator.tokens_after"
