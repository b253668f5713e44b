import { OPENAI_RESPONSES, OPENAI_SHARED, type CorpusEntry } from './corpus-entry.ts';

const base = `${OPENAI_RESPONSES} ResponseCreateParamsBase`;

/** Responses request bodies; every one carries `input`, which the gateway requires (§4.5). */
export const RESPONSES_CORPUS: readonly CorpusEntry[] = [
  {
    name: 'string input',
    source: `${base}.input (string), .model`,
    body: '{"model":"alpha/gen-6-astra","input":"Tell me a joke."}',
  },
  {
    name: 'native model ID and instructions',
    source: `${base}.instructions`,
    body: '{"model":"gen-6-astra","instructions":"Answer in French.","input":"Hello"}',
  },
  {
    name: 'easy input messages with every role',
    source: `${OPENAI_RESPONSES} EasyInputMessage (role user | assistant | system | developer, content string)`,
    body: '{"model":"alpha-latest","input":[{"role":"developer","content":"Be brief."},{"role":"system","content":"Policy text"},{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello!"},{"role":"user","content":"Bye"}]}',
  },
  {
    name: 'message items with input_text, input_image and input_file parts',
    source: `${OPENAI_RESPONSES} ResponseInputItem.Message, ResponseInputText, ResponseInputImage (image_url, file_id, detail), ResponseInputFile (file_data, file_id, file_url, filename)`,
    body: '{"model":"alpha/gen-6-astra","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"Compare these."},{"type":"input_image","image_url":"https://example.com/a.png","detail":"high"},{"type":"input_image","file_id":"file-img1","detail":"auto"},{"type":"input_file","file_id":"file-doc1"},{"type":"input_file","file_data":"data:application/pdf;base64,JVBERi0=","filename":"b.pdf"},{"type":"input_file","file_url":"https://example.com/c.pdf"}]}]}',
  },
  {
    name: 'input audio part',
    source: `${OPENAI_RESPONSES} ResponseInputAudio (input_audio.data, input_audio.format)`,
    body: '{"model":"alpha/gen-6-astra","input":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"UklGRiQAAABXQVZF","format":"mp3"}}]}]}',
  },
  {
    name: 'function tool round trip: function_call and function_call_output items',
    source: `${OPENAI_RESPONSES} ResponseFunctionToolCall, ResponseInputItem.FunctionCallOutput, FunctionTool (name, parameters, strict, description)`,
    body: '{"model":"alpha/gen-6-astra","input":[{"role":"user","content":"Weather in Oslo?"},{"type":"function_call","id":"fc_1","call_id":"call_1","name":"get_weather","arguments":"{\\"city\\":\\"Oslo\\"}","status":"completed"},{"type":"function_call_output","call_id":"call_1","output":"-3C"}],"tools":[{"type":"function","name":"get_weather","description":"Current weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false},"strict":true}]}',
  },
  {
    name: 'assistant output message item with output_text and refusal',
    source: `${OPENAI_RESPONSES} ResponseOutputMessage (id, content output_text/refusal, status), ResponseOutputText (annotations)`,
    body: '{"model":"alpha/gen-6-astra","input":[{"role":"user","content":"hi"},{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Hello","annotations":[]},{"type":"refusal","refusal":"No."}]},{"role":"user","content":"ok"}]}',
  },
  {
    name: 'reasoning item with encrypted content, then item references',
    source: `${OPENAI_RESPONSES} ResponseReasoningItem (id, summary, encrypted_content), ResponseInputItem.ItemReference`,
    body: '{"model":"alpha/gen-6-astra","input":[{"role":"user","content":"Think"},{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Considered options"}],"encrypted_content":"gAAAAABo..."},{"type":"item_reference","id":"msg_0"}],"include":["reasoning.encrypted_content"],"store":false}',
  },
  {
    name: 'built-in tools: web search, file search, code interpreter, image generation',
    source: `${OPENAI_RESPONSES} WebSearchTool, FileSearchTool (vector_store_ids, max_num_results), Tool.CodeInterpreter (container auto), Tool.ImageGeneration`,
    body: '{"model":"alpha/gen-6-astra","input":"Research and chart it","tools":[{"type":"web_search","search_context_size":"medium","user_location":{"type":"approximate","country":"DE"}},{"type":"file_search","vector_store_ids":["vs_1"],"max_num_results":5},{"type":"code_interpreter","container":{"type":"auto"}},{"type":"image_generation","size":"1024x1024","quality":"low"}]}',
  },
  {
    name: 'MCP and custom tools',
    source: `${OPENAI_RESPONSES} Tool.Mcp (server_label, server_url, require_approval, allowed_tools), CustomTool (format grammar)`,
    body: '{"model":"alpha/gen-6-astra","input":"Use the tools","tools":[{"type":"mcp","server_label":"docs","server_url":"https://mcp.example.com/sse","require_approval":"never","allowed_tools":["search"]},{"type":"custom","name":"calc","description":"Arithmetic","format":{"type":"grammar","syntax":"regex","definition":"^[0-9+*/ -]+$"}}]}',
  },
  {
    name: 'tool_choice as a string',
    source: `${base}.tool_choice (ToolChoiceOptions 'none' | 'auto' | 'required')`,
    body: '{"model":"alpha/gen-6-astra","input":"hi","tools":[{"type":"function","name":"noop","parameters":{"type":"object","properties":{}},"strict":false}],"tool_choice":"required","parallel_tool_calls":true}',
  },
  {
    name: 'tool_choice naming a function',
    source: `${OPENAI_RESPONSES} ToolChoiceFunction`,
    body: '{"model":"alpha/gen-6-astra","input":"hi","tools":[{"type":"function","name":"lookup","parameters":{"type":"object","properties":{"q":{"type":"string"}}},"strict":false}],"tool_choice":{"type":"function","name":"lookup"}}',
  },
  {
    name: 'tool_choice of a built-in type, and allowed tools',
    source: `${OPENAI_RESPONSES} ToolChoiceTypes, ToolChoiceAllowed (mode, tools)`,
    body: '{"model":"alpha/gen-6-astra","input":"hi","tools":[{"type":"web_search"},{"type":"function","name":"f","parameters":{"type":"object","properties":{}},"strict":true}],"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"web_search"}]}}',
  },
  {
    name: 'tool_choice for MCP and custom tools',
    source: `${OPENAI_RESPONSES} ToolChoiceMcp (server_label, name), ToolChoiceCustom`,
    body: '{"model":"alpha/gen-6-astra","input":"hi","tools":[{"type":"mcp","server_label":"docs","server_url":"https://mcp.example.com/sse"}],"tool_choice":{"type":"mcp","server_label":"docs","name":"search"}}',
  },
  {
    name: 'tool_choice of a custom tool',
    source: `${OPENAI_RESPONSES} ToolChoiceCustom`,
    body: '{"model":"alpha/gen-6-astra","input":"hi","tools":[{"type":"custom","name":"calc"}],"tool_choice":{"type":"custom","name":"calc"}}',
  },
  {
    name: 'reasoning effort and summary',
    source: `${base}.reasoning (${OPENAI_SHARED} Reasoning effort, summary)`,
    body: '{"model":"alpha/gen-6-astra","input":"Prove Fermat for n=3","reasoning":{"effort":"high","summary":"detailed"},"max_output_tokens":4096}',
  },
  {
    name: 'text format json_schema with verbosity, properties "2024","2023"',
    source: `${base}.text (ResponseTextConfig format ResponseFormatTextJSONSchemaConfig, verbosity)`,
    body: '{"model":"alpha/gen-6-astra","input":"Revenue by year","text":{"format":{"type":"json_schema","name":"revenue","description":"Revenue","schema":{"type":"object","properties":{"2024":{"type":"number"},"2023":{"type":"number"}},"required":["2024","2023"],"additionalProperties":false},"strict":true},"verbosity":"medium"}}',
  },
  {
    name: 'text format json_object and text',
    source: `${OPENAI_SHARED} ResponseFormatJSONObject via ResponseTextConfig.format`,
    body: '{"model":"alpha/gen-6-astra","input":"A JSON colour","text":{"format":{"type":"json_object"}}}',
  },
  {
    name: 'conversation by id, previous_response_id, store and background',
    source: `${base}.conversation (string), .previous_response_id, .store, .background`,
    body: '{"model":"alpha/gen-6-astra","input":"And then?","previous_response_id":"resp_123","store":true,"background":false}',
  },
  {
    name: 'conversation object',
    source: `${OPENAI_RESPONSES} ResponseConversationParam (id)`,
    body: '{"model":"alpha/gen-6-astra","input":"Continue","conversation":{"id":"conv_abc"}}',
  },
  {
    name: 'stored prompt with variables, together with input',
    source: `${base}.prompt (ResponsePrompt id, variables, version)`,
    body: '{"model":"alpha/gen-6-astra","prompt":{"id":"pmpt_123","version":"2","variables":{"city":"Oslo","photo":{"type":"input_image","image_url":"https://example.com/o.png"}}},"input":"Go"}',
  },
  {
    name: 'sampling, truncation, metadata, user, safety and service tier',
    source: `${base}.temperature, .top_p, .top_logprobs, .truncation, .metadata, .user, .safety_identifier, .service_tier`,
    body: '{"model":"alpha/gen-6-astra","input":"hi","temperature":0.7,"top_p":0.9,"top_logprobs":3,"truncation":"auto","metadata":{"trace":"t-1"},"user":"u-1","safety_identifier":"sid-9","service_tier":"priority"}',
  },
  {
    name: 'include list and prompt caching',
    source: `${base}.include (ResponseIncludable), .prompt_cache_key, .prompt_cache_retention, .prompt_cache_options`,
    body: '{"model":"alpha/gen-6-astra","input":"hi","include":["file_search_call.results","message.output_text.logprobs"],"prompt_cache_key":"k-1","prompt_cache_retention":"in_memory","prompt_cache_options":{"mode":"implicit"}}',
  },
  {
    name: 'context management and moderation',
    source: `${base}.context_management (ContextManagement type, compact_threshold), .moderation (Moderation model, policy)`,
    body: '{"model":"alpha/gen-6-astra","input":"hi","context_management":[{"type":"compaction","compact_threshold":100000}],"moderation":{"model":"omni-moderation-latest","policy":{"input":{"mode":"score"}}}}',
  },
  {
    name: 'every nullable field sent as null',
    source: `${base}: every member declared "| null" (background … truncation)`,
    body: '{"model":"alpha/gen-6-astra","input":"hi","background":null,"context_management":null,"conversation":null,"include":null,"instructions":null,"max_output_tokens":null,"metadata":null,"moderation":null,"parallel_tool_calls":null,"previous_response_id":null,"prompt":null,"prompt_cache_key":null,"prompt_cache_retention":null,"reasoning":null,"safety_identifier":null,"service_tier":null,"store":null,"stream":null,"stream_options":null,"temperature":null,"top_logprobs":null,"top_p":null,"truncation":null}',
  },
  {
    name: 'stream with stream_options',
    source: `${OPENAI_RESPONSES} ResponseCreateParamsStreaming.stream, ResponseCreateParams.StreamOptions (include_obfuscation)`,
    body: '{"model":"alpha/gen-5.5","input":"Stream it","stream":true,"stream_options":{"include_obfuscation":false}}',
  },
  {
    name: 'pretty-printed with big integers in metadata-like extra field',
    source: `${base} (input list of EasyInputMessage) + an extra field the API passes through`,
    body: '{\r\n\t"model" : "alpha/gen-6-astra",\r\n\t"input" : [ { "role" : "user", "content" : "\\u00bfQu\\u00e9 tal?" } ],\r\n\t"x_trace" : { "id" : 9223372036854775807, "2024" : 1, "2023" : 2 }\r\n}',
  },
];
