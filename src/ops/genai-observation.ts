/** The GenAI conventions' client metrics of one answered model request (one upstream operation). */
export interface GenAiObservation {
  /** `gen_ai.operation.name`. */
  readonly operation: string;
  /** `gen_ai.provider.name`: the provider's vendor prefix. */
  readonly provider: string;
  /** `gen_ai.request.model`: the model as sent to the provider (bounded by the catalog). */
  readonly requestModel: string;
  /** Tokens the upstream reported (`gen_ai.client.token.usage`), absent when it reported none. */
  readonly inputTokens?: number;
  readonly outputTokens?: number;
  /** `gen_ai.client.operation.duration`: from the first upstream attempt to the end of the answer, in seconds. */
  readonly durationS: number;
  /** Streams only: from the serving attempt's start to its first content event, in seconds. */
  readonly timeToFirstChunkS?: number;
  /** Streams only: the mean time between the content events after the first, in seconds. */
  readonly timePerOutputChunkS?: number;
}

/** Where GenAI observations go: `/metrics` (Prometheus naming) and, when configured, OTLP. */
export interface GenAiMetrics {
  genAi(observation: GenAiObservation): void;
}

/** Semantic-convention bucket boundaries (the GenAI conventions' advice). */
export const GENAI_BUCKETS = {
  tokens: [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864],
  duration: [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92],
  perChunk: [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5],
} as const;
