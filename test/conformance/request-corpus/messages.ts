import { ANTHROPIC_MESSAGES, type CorpusEntry } from './corpus-entry.ts';

const base = `${ANTHROPIC_MESSAGES} MessageCreateParamsBase`;
const count = `${ANTHROPIC_MESSAGES} MessageCountTokensParams`;

/** Messages request bodies (`POST /v1/messages`). */
export const MESSAGES_CORPUS: readonly CorpusEntry[] = [
  {
    name: 'minimal: model, max_tokens, one user message',
    source: `${base} (max_tokens, messages, model), MessageParam`,
    body: '{"model":"beta-fable-5-1","max_tokens":1024,"messages":[{"role":"user","content":"Hello, world"}]}',
  },
  {
    name: 'alias, system string, multi-turn',
    source: `${base}.system (string)`,
    body: '{"model":"beta-latest","max_tokens":256,"system":"You are terse.","messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello."},{"role":"user","content":"Bye"}]}',
  },
  {
    name: 'system as text blocks with cache_control and citations off',
    source: `${base}.system (Array<TextBlockParam>), CacheControlEphemeral (type, ttl)`,
    body: '{"model":"beta-opus-4-8","max_tokens":512,"system":[{"type":"text","text":"Long reusable instructions","cache_control":{"type":"ephemeral","ttl":"1h"}},{"type":"text","text":"Short part","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"Go"}]}',
  },
  {
    name: 'top-level cache_control',
    source: `${base}.cache_control (CacheControlEphemeral | null)`,
    body: '{"model":"beta-fable-5-1","max_tokens":64,"cache_control":{"type":"ephemeral","ttl":"5m"},"messages":[{"role":"user","content":"hi"}]}',
  },
  {
    name: 'image blocks: base64, URL and file sources',
    source: `${ANTHROPIC_MESSAGES} ImageBlockParam, Base64ImageSource, URLImageSource, FileImageSource`,
    body: '{"model":"beta-fable-5-1","max_tokens":300,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgoAAAANSUhEUg=="}},{"type":"image","source":{"type":"url","url":"https://example.com/cat.jpg"},"cache_control":{"type":"ephemeral"}},{"type":"image","source":{"type":"file","file_id":"file_011"}},{"type":"text","text":"Describe all three."}]}]}',
  },
  {
    name: 'document blocks: base64 PDF, plain text, URL PDF, content and file sources, with citations, title and context',
    source: `${ANTHROPIC_MESSAGES} DocumentBlockParam (source Base64PDFSource | PlainTextSource | URLPDFSource | ContentBlockSource | FileDocumentSource, citations, context, title, cache_control)`,
    body: '{"model":"beta-fable-5-1","max_tokens":800,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0xLjcK"},"title":"Report","context":"Q3 numbers","citations":{"enabled":true},"cache_control":{"type":"ephemeral"}},{"type":"document","source":{"type":"text","media_type":"text/plain","data":"The grass is green."}},{"type":"document","source":{"type":"url","url":"https://example.com/paper.pdf"}},{"type":"document","source":{"type":"content","content":[{"type":"text","text":"Chunk one"},{"type":"text","text":"Chunk two"}]}},{"type":"document","source":{"type":"file","file_id":"file_022"}},{"type":"text","text":"Cite your sources."}]}]}',
  },
  {
    name: 'search result blocks',
    source: `${ANTHROPIC_MESSAGES} SearchResultBlockParam (content, source, title, citations)`,
    body: '{"model":"beta-fable-5-1","max_tokens":400,"messages":[{"role":"user","content":[{"type":"search_result","source":"https://example.com/a","title":"A","content":[{"type":"text","text":"Fact A"}],"citations":{"enabled":true}},{"type":"text","text":"Answer using the result."}]}]}',
  },
  {
    name: 'client tool round trip: tool_use then tool_result with text, image and error',
    source: `${ANTHROPIC_MESSAGES} Tool (name, description, input_schema, strict), ToolUseBlockParam, ToolResultBlockParam (content, is_error, cache_control)`,
    body: '{"model":"beta-fable-5-1","max_tokens":1024,"tools":[{"name":"get_weather","description":"Current weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"strict":true,"cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"Weather in Kyoto?"},{"role":"assistant","content":[{"type":"text","text":"Checking."},{"type":"tool_use","id":"toolu_01","name":"get_weather","input":{"city":"Kyoto"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","content":[{"type":"text","text":"21C"},{"type":"image","source":{"type":"url","url":"https://example.com/sky.png"}}]},{"type":"text","text":"Thanks"}]}]}',
  },
  {
    name: 'tool_result marked as error with string content',
    source: `${ANTHROPIC_MESSAGES} ToolResultBlockParam.is_error`,
    body: '{"model":"beta-fable-5-1","max_tokens":200,"tools":[{"name":"f","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"call f"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_02","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_02","content":"boom","is_error":true}]}]}',
  },
  {
    name: 'thinking enabled with budget and display, thinking and redacted_thinking blocks with signatures replayed',
    source: `${base}.thinking (ThinkingConfigEnabled budget_tokens, display), ThinkingBlockParam (thinking, signature), RedactedThinkingBlockParam (data)`,
    body: '{"model":"beta-fable-5-1","max_tokens":16000,"thinking":{"type":"enabled","budget_tokens":10000,"display":"summarized"},"tools":[{"name":"calc","input_schema":{"type":"object","properties":{"expr":{"type":"string"}}}}],"messages":[{"role":"user","content":"What is 27*453?"},{"role":"assistant","content":[{"type":"thinking","thinking":"I should use the calculator.","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds..."},{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP..."},{"type":"tool_use","id":"toolu_03","name":"calc","input":{"expr":"27*453"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_03","content":"12231"}]}]}',
  },
  {
    name: 'thinking adaptive',
    source: `${ANTHROPIC_MESSAGES} ThinkingConfigAdaptive (display null)`,
    body: '{"model":"beta-opus-5","max_tokens":2048,"thinking":{"type":"adaptive","display":null},"messages":[{"role":"user","content":"Plan a trip"}]}',
  },
  {
    name: 'thinking disabled',
    source: `${ANTHROPIC_MESSAGES} ThinkingConfigDisabled`,
    body: '{"model":"beta-sonnet-4-6","max_tokens":128,"thinking":{"type":"disabled"},"messages":[{"role":"user","content":"Quick answer"}]}',
  },
  {
    name: 'thinking between tools',
    source: `${ANTHROPIC_MESSAGES} ThinkingConfigBetweenTools`,
    body: '{"model":"beta-fable-5-1","max_tokens":128,"thinking":{"type":"between_tools"},"messages":[{"role":"user","content":"hi"}]}',
  },
  {
    name: 'tool_choice auto with disable_parallel_tool_use',
    source: `${base}.tool_choice (ToolChoiceAuto)`,
    body: '{"model":"beta-fable-5-1","max_tokens":100,"tools":[{"name":"a","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto","disable_parallel_tool_use":true},"messages":[{"role":"user","content":"hi"}]}',
  },
  {
    name: 'tool_choice any',
    source: `${ANTHROPIC_MESSAGES} ToolChoiceAny`,
    body: '{"model":"beta-fable-5-1","max_tokens":100,"tools":[{"name":"a","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"},"messages":[{"role":"user","content":"hi"}]}',
  },
  {
    name: 'tool_choice naming a tool',
    source: `${ANTHROPIC_MESSAGES} ToolChoiceTool (name, disable_parallel_tool_use)`,
    body: '{"model":"beta-fable-5-1","max_tokens":100,"tools":[{"name":"a","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"a","disable_parallel_tool_use":false},"messages":[{"role":"user","content":"hi"}]}',
  },
  {
    name: 'tool_choice none',
    source: `${ANTHROPIC_MESSAGES} ToolChoiceNone`,
    body: '{"model":"beta-fable-5-1","max_tokens":100,"tools":[{"name":"a","input_schema":{"type":"object"}}],"tool_choice":{"type":"none"},"messages":[{"role":"user","content":"hi"}]}',
  },
  {
    name: 'server tools: web search, web fetch, bash, text editor, code execution, memory',
    source: `${ANTHROPIC_MESSAGES} ToolUnion (WebSearchTool20250305 max_uses allowed_domains user_location, WebFetchTool20250910, ToolBash20250124, ToolTextEditor20250728, CodeExecutionTool20250825, MemoryTool20250818)`,
    body: '{"model":"beta-fable-5-1","max_tokens":2000,"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":3,"allowed_domains":["example.com"],"user_location":{"type":"approximate","city":"Berlin","country":"DE"}},{"type":"web_fetch_20250910","name":"web_fetch","max_uses":2},{"type":"bash_20250124","name":"bash"},{"type":"text_editor_20250728","name":"str_replace_based_edit_tool"},{"type":"code_execution_20250825","name":"code_execution"},{"type":"memory_20250818","name":"memory"}],"messages":[{"role":"user","content":"Look it up and compute"}]}',
  },
  {
    name: 'output_config with effort and a JSON schema format, properties "2024","2023"',
    source: `${base}.output_config (OutputConfig effort, format JSONOutputFormat)`,
    body: '{"model":"beta-fable-5-1","max_tokens":500,"output_config":{"effort":"medium","format":{"type":"json_schema","schema":{"type":"object","properties":{"2024":{"type":"integer"},"2023":{"type":"integer"}},"required":["2024","2023"],"additionalProperties":false}}},"messages":[{"role":"user","content":"Units sold per year"}]}',
  },
  {
    name: 'metadata, stop_sequences, service_tier, speed, inference_geo',
    source: `${base}.metadata (Metadata user_id), .stop_sequences, .service_tier, .speed, .inference_geo`,
    body: '{"model":"beta-fable-5-1","max_tokens":100,"metadata":{"user_id":"13803d75-b4b5-4c3e-b2a2-6f21399b021b"},"stop_sequences":["\\n\\nHuman:","END"],"service_tier":"standard_only","speed":"fast","inference_geo":"us","messages":[{"role":"user","content":"hi"}]}',
  },
  {
    name: 'container by id, diagnostics, user_profile_id, workspace_id',
    source: `${base}.container (string), .diagnostics (DiagnosticsParam previous_message_id), .user_profile_id, .workspace_id`,
    body: '{"model":"beta-fable-5-1","max_tokens":100,"container":"container_abc","diagnostics":{"previous_message_id":"msg_01"},"user_profile_id":"prof_1","workspace_id":"wrkspc_1","messages":[{"role":"user","content":"hi"}]}',
  },
  {
    name: 'container params object',
    source: `${ANTHROPIC_MESSAGES} ContainerParams (id, skills)`,
    body: '{"model":"beta-fable-5-1","max_tokens":100,"container":{"id":"container_abc","skills":[{"type":"anthropic","skill_id":"xlsx","version":"latest"}]},"messages":[{"role":"user","content":"Make a sheet"}]}',
  },
  {
    name: 'every nullable top-level field sent as null',
    source: `${base}: every member declared "| null" (cache_control, container, diagnostics, inference_geo, speed)`,
    body: '{"model":"beta-fable-5-1","max_tokens":100,"cache_control":null,"container":null,"diagnostics":null,"inference_geo":null,"speed":null,"metadata":{"user_id":null},"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":null,"citations":null}]}]}',
  },
  {
    name: 'streaming',
    source: `${ANTHROPIC_MESSAGES} MessageCreateParamsStreaming.stream`,
    body: '{"model":"beta-fable-5-1","max_tokens":256,"stream":true,"messages":[{"role":"user","content":"Stream a poem"}]}',
  },
  {
    name: 'stream false, pretty-printed with escapes',
    source: `${ANTHROPIC_MESSAGES} MessageCreateParamsNonStreaming.stream`,
    body: '{\n  "model": "beta-fable-5-1",\n  "max_tokens": 100,\n  "stream": false,\n  "messages": [\n    {"role": "user", "content": "Gr\\u00fc\\u00dfe \\"aus\\" K\\u00f6ln \\ud83c\\udf7a"}\n  ]\n}',
  },
  {
    name: 'assistant prefill and a system-role message in messages',
    source: `${ANTHROPIC_MESSAGES} MessageParam = UserMessageParam | AssistantMessageParam | SystemMessageParam`,
    body: '{"model":"beta-fable-5-1","max_tokens":50,"messages":[{"role":"system","content":"Reply in JSON only."},{"role":"user","content":"JSON please"},{"role":"assistant","content":"{"}]}',
  },
];

/** count_tokens request bodies (`POST /v1/messages/count_tokens`). */
export const COUNT_TOKENS_CORPUS: readonly CorpusEntry[] = [
  {
    name: 'minimal',
    source: `${count} (messages, model)`,
    body: '{"model":"beta-fable-5-1","messages":[{"role":"user","content":"Hello, world"}]}',
  },
  {
    name: 'system blocks, tools, tool_choice and thinking',
    source: `${count}.system, .tools (MessageCountTokensTool), .tool_choice, .thinking`,
    body: '{"model":"beta-opus-4-8","system":[{"type":"text","text":"Be exact.","cache_control":{"type":"ephemeral"}}],"tools":[{"name":"calc","input_schema":{"type":"object","properties":{"e":{"type":"string"}}}},{"type":"web_search_20250305","name":"web_search"}],"tool_choice":{"type":"auto"},"thinking":{"type":"enabled","budget_tokens":2048},"messages":[{"role":"user","content":"2+2?"}]}',
  },
  {
    name: 'cache_control, output_config, speed, user_profile_id, workspace_id',
    source: `${count}.cache_control, .output_config, .speed, .user_profile_id, .workspace_id`,
    body: '{"model":"beta-latest","cache_control":{"type":"ephemeral"},"output_config":{"effort":"low"},"speed":"standard","user_profile_id":"prof_1","workspace_id":"wrkspc_1","messages":[{"role":"user","content":"hi"}]}',
  },
  {
    name: 'documents, images and thinking blocks with signatures',
    source: `${count} messages with DocumentBlockParam, ImageBlockParam, ThinkingBlockParam`,
    body: '{"model":"beta-fable-5-1","messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"Doc"}},{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"/9j/4AAQ"}},{"type":"text","text":"Count me"}]},{"role":"assistant","content":[{"type":"thinking","thinking":"Hmm","signature":"sig_abc"},{"type":"text","text":"Counted."}]},{"role":"user","content":"again"}]}',
  },
  {
    name: 'nullable fields as null',
    source: `${count}: cache_control, speed (… | null)`,
    body: '{"model":"beta-fable-5-1","cache_control":null,"speed":null,"messages":[{"role":"user","content":"hi"}]}',
  },
];
