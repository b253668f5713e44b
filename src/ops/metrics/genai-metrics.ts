import { Histogram, type Registry } from 'prom-client';
import { GENAI_BUCKETS } from '../genai-observation.ts';

type GenAiLabel = 'gen_ai_operation_name' | 'gen_ai_provider_name' | 'gen_ai_request_model';

/** The OpenTelemetry GenAI client metrics of the upstream operations, by operation, provider and requested model. */
export interface GenAiHistograms {
  readonly tokens: Histogram<GenAiLabel | 'gen_ai_token_type'>;
  readonly duration: Histogram<GenAiLabel>;
  readonly firstChunk: Histogram<GenAiLabel>;
  readonly perChunk: Histogram<GenAiLabel>;
}

export function defineGenAiMetrics(registers: Registry[]): GenAiHistograms {
  const genAiLabels = ['gen_ai_operation_name', 'gen_ai_provider_name', 'gen_ai_request_model'] as const;
  return {
    tokens: new Histogram({
      name: 'gen_ai_client_token_usage',
      help: 'gen_ai.client.token.usage: tokens each upstream operation used, by token type (input, output), as the upstream reported them',
      labelNames: [...genAiLabels, 'gen_ai_token_type'],
      buckets: [...GENAI_BUCKETS.tokens],
      registers,
    }),
    duration: new Histogram({
      name: 'gen_ai_client_operation_duration_seconds',
      help: 'gen_ai.client.operation.duration: from the first upstream attempt to the end of the answer',
      labelNames: genAiLabels,
      buckets: [...GENAI_BUCKETS.duration],
      registers,
    }),
    firstChunk: new Histogram({
      name: 'gen_ai_client_operation_time_to_first_chunk_seconds',
      help: 'gen_ai.client.operation.time_to_first_chunk: from the serving attempt to its first content event (streams)',
      labelNames: genAiLabels,
      buckets: [...GENAI_BUCKETS.duration],
      registers,
    }),
    perChunk: new Histogram({
      name: 'gen_ai_client_operation_time_per_output_chunk_seconds',
      help: 'gen_ai.client.operation.time_per_output_chunk: the mean time between the content events after the first, one observation per stream',
      labelNames: genAiLabels,
      buckets: [...GENAI_BUCKETS.perChunk],
      registers,
    }),
  };
}
