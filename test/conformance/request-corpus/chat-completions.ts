import { OPENAI_CHAT, OPENAI_SHARED, type CorpusEntry } from './corpus-entry.ts';

const base = `${OPENAI_CHAT} ChatCompletionCreateParamsBase`;

/** Chat Completions request bodies, one or more per documented field and message and part type. */
export const CHAT_COMPLETIONS_CORPUS: readonly CorpusEntry[] = [
  {
    name: 'minimal user message',
    source: `${base} (model, messages) + ChatCompletionUserMessageParam`,
    body: '{"model":"alpha/gen-6-astra","messages":[{"role":"user","content":"Say hello."}]}',
  },
  {
    name: 'developer and system messages, string and text-part content, with name',
    source: `${OPENAI_CHAT} ChatCompletionDeveloperMessageParam, ChatCompletionSystemMessageParam, ChatCompletionContentPartText`,
    body: '{"model":"alpha/gen-6-astra","messages":[{"role":"developer","content":"Answer tersely.","name":"ops"},{"role":"system","content":[{"type":"text","text":"You are a careful assistant."}],"name":"policy"},{"role":"user","content":"Hi","name":"ada"}]}',
  },
  {
    name: 'image parts by URL and data URL with detail',
    source: `${OPENAI_CHAT} ChatCompletionContentPartImage (image_url.url, image_url.detail)`,
    body: '{"model":"alpha/gen-6-astra","messages":[{"role":"user","content":[{"type":"text","text":"What is in these images?"},{"type":"image_url","image_url":{"url":"https://example.com/cat.png","detail":"high"}},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo=","detail":"low"}},{"type":"image_url","image_url":{"url":"https://example.com/dog.jpg","detail":"auto"}}]}]}',
  },
  {
    name: 'input audio part',
    source: `${OPENAI_CHAT} ChatCompletionContentPartInputAudio (input_audio.data, input_audio.format)`,
    body: '{"model":"alpha/gen-6-astra","messages":[{"role":"user","content":[{"type":"text","text":"Transcribe."},{"type":"input_audio","input_audio":{"data":"UklGRiQAAABXQVZF","format":"wav"}}]}]}',
  },
  {
    name: 'file parts by id and by inline data',
    source: `${OPENAI_CHAT} ChatCompletionContentPart.File (file.file_id, file.file_data, file.filename)`,
    body: '{"model":"alpha/gen-6-astra","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-abc123"}},{"type":"file","file":{"file_data":"data:application/pdf;base64,JVBERi0xLjQ=","filename":"report.pdf"}},{"type":"text","text":"Summarise both."}]}]}',
  },
  {
    name: 'tool-calling loop: assistant content null with tool_calls, then tool messages',
    source: `${OPENAI_CHAT} ChatCompletionAssistantMessageParam (content null, tool_calls), ChatCompletionMessageFunctionToolCall, ChatCompletionToolMessageParam`,
    body: '{"model":"alpha/gen-6-astra","messages":[{"role":"user","content":"Weather in Paris and Rome?"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\\"city\\":\\"Paris\\"}"}},{"id":"call_2","type":"function","function":{"name":"get_weather","arguments":"{\\"city\\":\\"Rome\\"}"}}]},{"role":"tool","tool_call_id":"call_1","content":"18C"},{"role":"tool","tool_call_id":"call_2","content":[{"type":"text","text":"22C"}]}],"tools":[{"type":"function","function":{"name":"get_weather","description":"Current weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false},"strict":true}}]}',
  },
  {
    name: 'legacy function_call with null content, then a function message with null content',
    source: `${OPENAI_CHAT} ChatCompletionAssistantMessageParam.FunctionCall, ChatCompletionFunctionMessageParam (content: string | null)`,
    body: '{"model":"alpha/gen-6-astra","messages":[{"role":"user","content":"Time?"},{"role":"assistant","content":null,"function_call":{"name":"now","arguments":"{}"}},{"role":"function","name":"now","content":null}],"functions":[{"name":"now","description":"Current time","parameters":{"type":"object","properties":{}}}],"function_call":"auto"}',
  },
  {
    name: 'legacy functions with function_call naming one function',
    source: `${base}.functions, .function_call (ChatCompletionFunctionCallOption)`,
    body: '{"model":"alpha/gen-6-astra","messages":[{"role":"user","content":"Add 2 and 3"}],"functions":[{"name":"add","parameters":{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}}}}],"function_call":{"name":"add"}}',
  },
  {
    name: 'assistant message with refusal, name, audio id and text/refusal parts',
    source: `${OPENAI_CHAT} ChatCompletionAssistantMessageParam (audio, name, refusal), ChatCompletionContentPartRefusal`,
    body: '{"model":"alpha/gen-6-astra","messages":[{"role":"user","content":"Do something bad"},{"role":"assistant","content":[{"type":"refusal","refusal":"I can\'t help with that."}],"refusal":"I can\'t help with that.","name":"helper"},{"role":"assistant","content":null,"audio":{"id":"audio_abc123"}},{"role":"user","content":"OK, something good then."}]}',
  },
  {
    name: 'custom tool with a grammar, tool_choice naming a custom tool',
    source: `${OPENAI_CHAT} ChatCompletionCustomTool (custom.format grammar), ChatCompletionNamedToolChoiceCustom, ChatCompletionMessageCustomToolCall`,
    body: '{"model":"alpha/gen-6-astra","messages":[{"role":"user","content":"Write SQL"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_9","type":"custom","custom":{"name":"sql","input":"SELECT 1"}}]},{"role":"tool","tool_call_id":"call_9","content":"1"}],"tools":[{"type":"custom","custom":{"name":"sql","description":"Runs SQL","format":{"type":"grammar","grammar":{"definition":"start: \\"SELECT\\" NUMBER","syntax":"lark"}}}},{"type":"custom","custom":{"name":"notes","format":{"type":"text"}}}],"tool_choice":{"type":"custom","custom":{"name":"sql"}}}',
  },
  {
    name: 'tool_choice as each string',
    source: `${OPENAI_CHAT} ChatCompletionToolChoiceOption ('none' | 'auto' | 'required'), ${base}.parallel_tool_calls`,
    body: '{"model":"alpha/gen-6-astra","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"noop"}}],"tool_choice":"required","parallel_tool_calls":false}',
  },
  {
    name: 'tool_choice none',
    source: `${OPENAI_CHAT} ChatCompletionToolChoiceOption 'none'`,
    body: '{"model":"zeta/zeta-k3","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"noop"}}],"tool_choice":"none"}',
  },
  {
    name: 'tool_choice naming a function',
    source: `${OPENAI_CHAT} ChatCompletionNamedToolChoice`,
    body: '{"model":"delta/delta-4.7","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}}],"tool_choice":{"type":"function","function":{"name":"lookup"}}}',
  },
  {
    name: 'tool_choice allowed_tools',
    source: `${OPENAI_CHAT} ChatCompletionAllowedToolChoice, ChatCompletionAllowedTools (mode, tools)`,
    body: '{"model":"alpha/gen-6-astra","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"b"}}],"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[{"type":"function","function":{"name":"a"}}]}}}',
  },
  {
    name: 'response_format json_schema with properties "2024","2023" in that order',
    source: `${OPENAI_SHARED} ResponseFormatJSONSchema (json_schema.name, description, schema, strict)`,
    body: '{"model":"alpha/gen-6-astra","messages":[{"role":"user","content":"Revenue by year"}],"response_format":{"type":"json_schema","json_schema":{"name":"revenue","description":"Revenue per year","schema":{"type":"object","properties":{"2024":{"type":"number"},"2023":{"type":"number"},"10":{"type":"string"}},"required":["2024","2023","10"],"additionalProperties":false},"strict":true}}}',
  },
  {
    name: 'response_format json_object and text',
    source: `${OPENAI_SHARED} ResponseFormatJSONObject, ResponseFormatText`,
    body: '{"model":"gamma-latest","messages":[{"role":"system","content":"Reply in JSON."},{"role":"user","content":"A colour"}],"response_format":{"type":"json_object"}}',
  },
  {
    name: 'response_format text',
    source: `${OPENAI_SHARED} ResponseFormatText`,
    body: '{"model":"epsilon/epsilon-5.3-flash","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"text"}}',
  },
  {
    name: 'sampling controls with big integers and integer-like logit_bias keys',
    source: `${base}.frequency_penalty, .presence_penalty, .temperature, .top_p, .seed, .logit_bias, .n, .stop`,
    body: '{"model":"alpha/gen-6-astra","messages":[{"role":"user","content":"Pick a number"}],"frequency_penalty":0.5,"presence_penalty":-0.25,"temperature":1.0,"top_p":0.95,"seed":9223372036854775807,"logit_bias":{"50256":-100,"1734":5,"9":1},"n":2,"stop":["\\n\\n","END"]}',
  },
  {
    name: 'stop as a single string, big integer seed',
    source: `${base}.stop (string), .seed`,
    body: '{"model":"alpha/gen-6-astra","messages":[{"role":"user","content":"Count"}],"stop":"10","seed":12345678901234567}',
  },
  {
    name: 'logprobs with top_logprobs, max_completion_tokens and deprecated max_tokens',
    source: `${base}.logprobs, .top_logprobs, .max_completion_tokens, .max_tokens`,
    body: '{"model":"alpha/gen-6-astra","messages":[{"role":"user","content":"hi"}],"logprobs":true,"top_logprobs":5,"max_completion_tokens":256,"max_tokens":256}',
  },
  {
    name: 'audio output with modalities',
    source: `${base}.modalities, .audio (ChatCompletionAudioParam format, voice)`,
    body: '{"model":"alpha/gen-6-astra","messages":[{"role":"user","content":"Say hi out loud"}],"modalities":["text","audio"],"audio":{"voice":"alloy","format":"wav"}}',
  },
  {
    name: 'audio voice by custom id',
    source: `${OPENAI_CHAT} ChatCompletionAudioParam.ID`,
    body: '{"model":"alpha/gen-6-astra","messages":[{"role":"user","content":"hi"}],"modalities":["audio"],"audio":{"voice":{"id":"voice_123"},"format":"pcm16"}}',
  },
  {
    name: 'predicted output as text parts',
    source: `${base}.prediction (ChatCompletionPredictionContent)`,
    body: '{"model":"alpha/gen-6-astra","messages":[{"role":"user","content":"Rename x to y in: let x = 1;"}],"prediction":{"type":"content","content":[{"type":"text","text":"let y = 1;"}]}}',
  },
  {
    name: 'store, metadata, user, safety_identifier, service_tier',
    source: `${base}.store, .metadata (Shared.Metadata), .user, .safety_identifier, .service_tier`,
    body: '{"model":"alpha/gen-6-astra","messages":[{"role":"user","content":"hi"}],"store":true,"metadata":{"project":"gateway","run":"42"},"user":"user-123","safety_identifier":"sha256:ab12","service_tier":"flex"}',
  },
  {
    name: 'reasoning_effort and verbosity',
    source: `${base}.reasoning_effort (${OPENAI_SHARED} ReasoningEffort), .verbosity`,
    body: '{"model":"alpha/gen-6-astra","messages":[{"role":"user","content":"Prove it"}],"reasoning_effort":"xhigh","verbosity":"low"}',
  },
  {
    name: 'prompt cache key, retention and options',
    source: `${base}.prompt_cache_key, .prompt_cache_retention, .prompt_cache_options (ChatCompletionCreateParams.PromptCacheOptions mode, ttl)`,
    body: '{"model":"alpha/gen-6-astra","messages":[{"role":"system","content":"Long stable prefix"},{"role":"user","content":"hi"}],"prompt_cache_key":"tenant-7","prompt_cache_retention":"24h","prompt_cache_options":{"mode":"explicit","ttl":"30m"}}',
  },
  {
    name: 'web search options with an approximate user location',
    source: `${base}.web_search_options (WebSearchOptions.search_context_size, user_location.approximate)`,
    body: '{"model":"alpha/gen-6-astra","messages":[{"role":"user","content":"News near me"}],"web_search_options":{"search_context_size":"high","user_location":{"type":"approximate","approximate":{"city":"Lyon","country":"FR","region":"ARA","timezone":"Europe/Paris"}}}}',
  },
  {
    name: 'moderation policy',
    source: `${base}.moderation (ChatCompletionCreateParams.Moderation model, policy.input.mode, policy.output.mode)`,
    body: '{"model":"alpha/gen-6-astra","messages":[{"role":"user","content":"hi"}],"moderation":{"model":"omni-moderation-latest","policy":{"input":{"mode":"block"},"output":{"mode":"score"}}}}',
  },
  {
    name: 'every nullable field sent as null',
    source: `${base}: every member declared "| null" (audio … verbosity), stream and stream_options included`,
    body: '{"model":"alpha/gen-6-astra","messages":[{"role":"user","content":"hi"}],"audio":null,"frequency_penalty":null,"logit_bias":null,"logprobs":null,"max_completion_tokens":null,"max_tokens":null,"metadata":null,"modalities":null,"moderation":null,"n":null,"prediction":null,"presence_penalty":null,"prompt_cache_key":null,"prompt_cache_retention":null,"reasoning_effort":null,"safety_identifier":null,"seed":null,"service_tier":null,"stop":null,"store":null,"stream":null,"stream_options":null,"temperature":null,"top_logprobs":null,"top_p":null,"verbosity":null}',
  },
  {
    name: 'nullable members inside messages sent as null',
    source: `${OPENAI_CHAT} ChatCompletionAssistantMessageParam (audio, content, function_call, refusal: … | null)`,
    body: '{"model":"alpha/gen-6-astra","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Hello","audio":null,"function_call":null,"refusal":null},{"role":"user","content":"again"}]}',
  },
  {
    name: 'pretty-printed body with escapes and non-ASCII text',
    source: `${base} (messages with ChatCompletionUserMessageParam string content)`,
    body: '{\n  "model": "alpha/gen-6-astra",\n  "messages": [\n    {\n      "role": "user",\n      "content": "Caf\\u00e9, \\"quotes\\", tab\\t, emoji 😀, slash \\/ and ünïcödé"\n    }\n  ],\n  "temperature": 0\n}\n',
  },
  {
    name: 'stream with stream_options include_obfuscation',
    source: `${base}.stream, .stream_options (ChatCompletionStreamOptions include_obfuscation)`,
    body: '{"model":"alpha/gen-6-astra","messages":[{"role":"user","content":"Stream a haiku"}],"stream":true,"stream_options":{"include_obfuscation":false}}',
    upstream:
      '{"model":"gen-6-astra","messages":[{"role":"user","content":"Stream a haiku"}],"stream":true,"stream_options":{"include_obfuscation":false,"include_usage":true}}',
  },
  {
    name: 'stream with include_usage already true',
    source: `${OPENAI_CHAT} ChatCompletionStreamOptions.include_usage`,
    body: '{"model":"beta-latest","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}',
    upstream:
      '{"model":"beta-fable-5-1","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}',
  },
  {
    name: 'stream without stream_options',
    source: `${OPENAI_CHAT} ChatCompletionCreateParamsStreaming.stream`,
    body: '{"model":"epsilon/epsilon-5.3-flash","messages":[{"role":"user","content":"hi"}],"stream":true}',
    upstream:
      '{"model":"epsilon-5.3-flash","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}',
  },
  {
    name: 'stream true with stream_options null',
    source: `${base}.stream_options (ChatCompletionStreamOptions | null)`,
    body: '{"model":"alpha/gen-6-astra","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":null}',
    upstream:
      '{"model":"gen-6-astra","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}',
  },
  {
    name: 'stream false',
    source: `${OPENAI_CHAT} ChatCompletionCreateParamsNonStreaming.stream`,
    body: '{"model":"alpha/gen-6-astra","messages":[{"role":"user","content":"hi"}],"stream":false,"stream_options":{"include_usage":false}}',
  },
  {
    name: 'unknown extra fields (vendor extensions) forwarded',
    source: `${base} (the API ignores or reads fields the SDK passes through as extra body)`,
    body: '{"model":"gamma-latest","messages":[{"role":"user","content":"hi"}],"extra_body_flag":true,"vendor":{"thinking":{"budget":1024},"list":[1,2.50,-3e-2]}}',
  },
];
