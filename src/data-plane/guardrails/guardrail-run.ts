import type { GuardrailActed } from '../../core/diagnostics.ts';
import type { CallerKey, GuardrailMark } from '../../core/exchange.ts';
import type { WireFormatRules } from '../../core/formats/index.ts';
import { guardrailRefusal, type GatewayError } from '../../core/gateway-errors.ts';
import {
  checkText,
  StreamGuard,
  type StreamItem,
  type StreamPiece,
  type StreamStep,
} from '../../guardrails/text-engine.ts';
import type { CheckedText, TextContext } from '../../guardrails/guardrail.ts';
import type { GuardrailSelection, GuardrailSet, PhaseGuardrails } from '../../guardrails/guardrail-set.ts';
import type { GuardrailPhase, RouteId, SseEvent } from '../../plugins/plugin-contract.ts';
import { parseObject, type Json, eventTexts, setTextAt, type TextSlot } from '../../core/formats/format-reading.ts';
import { isPluginFault } from '../../plugins/plugin-fault.ts';
import { type BlockRewrite, replaceBlockData, SseSplitter, type SseBlock } from '../sse/sse-relay.ts';
import type { BodySink, UpstreamBody } from '../sse/upstream-body.ts';

export type { GuardrailActed };

/** The guardrails a caller gets: its key's list, else its team's, else every configured one; none when it gets none. */
export function selectionFor(
  set: GuardrailSet | undefined,
  caller: CallerKey | undefined,
): GuardrailSelection | undefined {
  return set?.select(caller?.guardrails ?? caller?.team?.guardrails);
}

/** Where a request runs: its client route, the model serving it, who asks. */
export interface GuardrailSite {
  readonly route: RouteId;
  readonly model: string;
  readonly requestId?: string;
  readonly keyId?: string;
  readonly team?: string;
}

/** What the guardrails made of a list of texts: refused, or each text to use (undefined where unchanged). */
export type TextsOutcome =
  | { readonly blocked: GatewayError }
  | { readonly blocked?: undefined; readonly texts: readonly (string | undefined)[] };

/**
 * The guardrails one request runs under, once its model is resolved: those its caller gets (by phase),
 * the format whose texts they read, and what they did (the usage record's marks, each reported as it
 * happens).
 */
export class GuardrailRun {
  readonly marks: GuardrailMark[] = [];
  /**
   * A webhook that did not answer let a text pass unchecked (`fail_open`): the answer is not one every guardrail
   * passed.
   */
  unchecked = false;
  private readonly reported = new Set<string>();

  constructor(
    readonly selection: GuardrailSelection,
    /** The rules of the request's wire format (where its texts are). */
    readonly rules: WireFormatRules,
    readonly site: GuardrailSite,
    private readonly report?: (acted: GuardrailActed) => void,
  ) {}

  /** Where texts of a phase are read, for the guardrails. */
  context(phase: GuardrailPhase): TextContext {
    return { phase, route: this.site.route, model: this.site.model };
  }

  /** Notes what a guardrail did: marked for the usage record and reported, once per guardrail, phase and action. */
  acted(
    guardrail: string,
    phase: GuardrailPhase,
    action: GuardrailActed['action'],
    cause: GuardrailActed['cause'],
    detail?: string,
  ): void {
    if (action === 'fail_open') this.unchecked = true;
    const key = `${guardrail}\u0000${phase}\u0000${action}`;
    if (this.reported.has(key)) return;
    this.reported.add(key);
    if (action !== 'fail_open') this.marks.push({ name: guardrail, phase, action });
    this.report?.({
      guardrail,
      phase,
      action,
      cause,
      ...(detail === undefined ? {} : { detail }),
      route: this.site.route,
      model: this.site.model,
      requestId: this.site.requestId,
      keyId: this.site.keyId,
      team: this.site.team,
    });
  }

  /**
   * Runs a phase's guardrails over whole texts (a request's, a JSON answer's): the text guardrails on
   * each (JSON text with its escapes undone), in configuration order, then each webhook on all of them at
   * once, as they are (asynchronous: only then is a promise returned). A guardrail plugin's fault is
   * thrown (its `PluginFault`).
   */
  checkTexts(
    phase: GuardrailPhase,
    guardrails: PhaseGuardrails,
    texts: readonly CheckedText[],
    stream: boolean,
  ): TextsOutcome | Promise<TextsOutcome> {
    const context = this.context(phase);
    const current = texts.map((checked) => checked.text);
    const changed: (string | undefined)[] = texts.map(() => undefined);
    if (guardrails.text.length > 0) {
      for (const [index, { text, json }] of texts.entries()) {
        const verdict = checkText(text, guardrails.text, context, json);
        if (verdict.kind === 'block') {
          this.acted(verdict.guardrail, phase, 'block', 'finding');
          return { blocked: guardrailRefusal(verdict.guardrail, phase) };
        }
        if (verdict.kind === 'redact') {
          current[index] = changed[index] = verdict.text;
          for (const name of verdict.guardrails) this.acted(name, phase, 'redact', 'finding');
        }
      }
    }
    if (guardrails.webhooks.length === 0 || texts.length === 0) return { texts: changed };
    return this.askWebhooks(phase, guardrails, current, changed, stream);
  }

  private async askWebhooks(
    phase: GuardrailPhase,
    guardrails: PhaseGuardrails,
    current: string[],
    changed: (string | undefined)[],
    stream: boolean,
  ): Promise<TextsOutcome> {
    const { keyId, team, requestId } = this.site;
    for (const webhook of guardrails.webhooks) {
      const verdict = await webhook.check(current, { ...this.context(phase), keyId, team, requestId, stream });
      const refused = this.webhookVerdict(webhook.name, webhook.failMode, phase, verdict);
      if (refused) return { blocked: refused };
      if (verdict.kind === 'rewrite') {
        verdict.texts.forEach((text, index) => {
          if (text !== current[index]) current[index] = changed[index] = text;
        });
      }
    }
    return { texts: changed };
  }

  /**
   * Notes a webhook's verdict: the refusal to answer with (a block, or an unavailable webhook that
   * fails closed), else undefined (allowed; a rewrite noted as a redaction; unavailable and open).
   */
  webhookVerdict(
    name: string,
    failMode: 'open' | 'closed',
    phase: GuardrailPhase,
    verdict: Awaited<ReturnType<PhaseGuardrails['webhooks'][number]['check']>>,
  ): GatewayError | undefined {
    if (verdict.kind === 'block') {
      this.acted(name, phase, 'block', 'webhook');
      return guardrailRefusal(name, phase);
    }
    if (verdict.kind === 'rewrite') this.acted(name, phase, 'redact', 'webhook');
    if (verdict.kind === 'unavailable') {
      if (failMode === 'closed') {
        this.acted(name, phase, 'block', 'unavailable', verdict.reason);
        return guardrailRefusal(name, phase, true);
      }
      this.acted(name, phase, 'fail_open', 'unavailable', verdict.reason);
    }
    return undefined;
  }
}

/** A guardrail ended a stream: the refusal the relay sends in band, in the stream's format. */
export class GuardrailStreamBlock extends Error {
  constructor(readonly refusal: GatewayError) {
    super(refusal.detail);
    this.name = 'GuardrailStreamBlock';
  }
}

export function isGuardrailStreamBlock(error: unknown): error is GuardrailStreamBlock {
  return error instanceof GuardrailStreamBlock;
}

/** What runs on each upstream event before the guardrails: the usage tap (as it came), then the fixups (a mapping). */
export interface GuardHooks {
  readonly tap?: (event: SseEvent) => void;
  readonly fixups?: BlockRewrite;
}

/** Characters of each channel's delivered text a webhook is shown before a batch (`context.preceding`). */
const PRECEDING_CHARS = 256;

/** A text of an event: as it came (`text`, what the guard reads) and as it stands now (`current`). */
interface GuardedPiece extends StreamPiece {
  current: string;
}

/** One event of the stream as the guard sees it: its bytes (a copy), its data parsed, its texts. */
class GuardedEvent implements StreamItem {
  readonly deltas: GuardedPiece[] = [];
  readonly wholes: GuardedPiece[] = [];
  readonly closes: readonly string[] = [];
  private dirty = false;

  constructor(
    private readonly raw: Buffer,
    private readonly payload: Json | undefined,
    texts: ReturnType<GuardrailRun['rules']['texts']['event']> | undefined,
    /** The event's data as the upstream sent it (undefined for a comment). */
    readonly data: string | undefined,
  ) {
    if (!texts || !payload) return;
    for (const slot of texts.deltas) this.deltas.push(this.piece(slot.channel, slot));
    for (const slot of texts.wholes) this.wholes.push(this.piece('', slot));
    this.closes = texts.closes;
  }

  private piece(channel: string, slot: TextSlot): GuardedPiece {
    const piece: GuardedPiece = {
      channel,
      text: slot.text,
      json: slot.json,
      current: slot.text,
      set: (value) => {
        setTextAt(this.payload, slot, value);
        piece.current = value;
        this.dirty = true;
      },
    };
    return piece;
  }

  /** The event's bytes: as they came, or with its data written anew when a text of it changed. */
  bytes(): Buffer {
    return this.dirty ? replaceBlockData(this.raw, JSON.stringify(this.payload)) : this.raw;
  }
}

/**
 * An upstream stream body with the response guardrails between it and the relay: each whole event is
 * parsed and its texts (its format's `texts.event`) go through a {@link StreamGuard}, which holds back
 * only the window a finding could still span and lets the rest out at once; events leave as their own
 * bytes unless a redaction rewrote their data. Webhook guardrails then see each batch of released text
 * before it goes out (the body paused meanwhile). A block aborts the upstream and fails the relay with a
 * {@link GuardrailStreamBlock}; a guardrail plugin's fault with its `PluginFault`. An event larger than
 * `maxEventBytes` ends the guarded text and is handed on so that the relay refuses it as it does.
 */
export class GuardedBody implements UpstreamBody {
  private readonly splitter: SseSplitter;
  private readonly guard: StreamGuard<GuardedEvent>;
  private sink: BodySink | undefined;
  private stopped = false;
  /** The relay paused the body (its client's buffer is full). */
  private relayPaused = false;
  /** Released events waiting for the webhooks, in order; and whether a batch is being asked about. */
  private readonly unapproved: GuardedEvent[] = [];
  private approving = false;
  /** What to do once the last batch is approved: end, or fail with an upstream error. */
  private finish: (() => void) | undefined;
  /** The end of each channel's delivered text, for the webhooks. */
  private readonly delivered = new Map<string, string>();

  constructor(
    private readonly inner: UpstreamBody,
    private readonly run: GuardrailRun,
    private readonly guardrails: PhaseGuardrails,
    private readonly maxEventBytes: number,
    /**
     * The usage tap, told each event as the upstream sent it (it then sees the events a block drops too),
     * and the plugin's stream fixups, applied before the guardrails read an event.
     */
    private readonly hooks: GuardHooks = {},
  ) {
    this.splitter = new SseSplitter(maxEventBytes);
    this.guard = new StreamGuard(guardrails.text, run.context('response'));
  }

  attach(sink: BodySink): void {
    this.sink = sink;
    this.inner.attach({
      data: (chunk) => this.data(chunk),
      end: () => this.end(),
      error: (error) => this.failed(error),
    });
  }

  pause(): void {
    this.relayPaused = true;
    this.inner.pause();
  }

  resume(): void {
    this.relayPaused = false;
    if (!this.approving) this.inner.resume();
  }

  abort(): void {
    this.stopped = true;
    this.inner.abort();
  }

  private data(chunk: Uint8Array): void {
    if (this.stopped) return;
    const out: GuardedEvent[] = [];
    try {
      for (const block of this.splitter.push(chunk)) {
        const fixed = this.fixed(block, out);
        if (fixed === undefined) return;
        for (const each of fixed) if (!this.take(this.guard.push(this.event(each)), out)) return;
      }
      if (this.splitter.oversized) {
        if (!this.take(this.guard.end(), out)) return;
        this.emit(out);
        // The relay's own splitter refuses it as over its cap, as it would the upstream's event.
        this.forward(() => this.sink!.data(Buffer.alloc(this.maxEventBytes + 1, 0x20)));
        this.stopped = true;
        this.inner.abort();
        return;
      }
    } catch (error) {
      return this.fault(error);
    }
    this.emit(out);
  }

  private end(): void {
    if (this.stopped) return;
    const out: GuardedEvent[] = [];
    try {
      if (!this.take(this.guard.end(), out)) return;
    } catch (error) {
      return this.fault(error);
    }
    this.emit(out);
    // An event cut off by the end of the stream goes out as it came (the client discards it too).
    const rest = Buffer.from(this.splitter.rest());
    this.forward(() => {
      if (rest.length > 0) this.sink!.data(rest);
      this.sink!.end();
    });
  }

  /**
   * The upstream broke off: what was held is judged as it stands and let out (or blocked), then the relay hears of the
   * break.
   */
  private failed(error: unknown): void {
    if (this.stopped) return;
    const out: GuardedEvent[] = [];
    try {
      if (!this.take(this.guard.end(), out)) return;
    } catch (fault) {
      return this.fault(fault);
    }
    this.emit(out);
    this.forward(() => this.sink!.error(error));
  }

  /**
   * The block tapped as the upstream sent it, then as the plugin's stream fixups leave it (the guardrails
   * read what the client gets); when a hook fails, what was released before it goes on and the relay
   * hears of the fault (undefined).
   */
  private fixed(block: SseBlock, out: GuardedEvent[]): readonly SseBlock[] | undefined {
    const { tap, fixups } = this.hooks;
    if (!tap && !fixups) return [block];
    try {
      if (tap && block.event) tap(block.event);
      return fixups ? fixups.blocks(block) : [block];
    } catch (error) {
      // The upstream is dropped (it hands on nothing more); what was released still goes, webhooks first.
      this.inner.abort();
      this.emit(out.splice(0));
      this.forward(() => {
        this.stopped = true;
        if (this.sink!.fault) this.sink!.fault(error);
        else this.sink!.error(error);
      });
      return undefined;
    }
  }

  private event(block: SseBlock): GuardedEvent {
    // Held bytes outlive the chunk they came in: a copy.
    const raw = Buffer.from(block.raw);
    const payload = block.event ? parseObject(block.event.data) : undefined;
    return new GuardedEvent(
      raw,
      payload,
      payload && !Array.isArray(payload) ? eventTexts(this.run.rules.texts, payload) : undefined,
      block.event?.data,
    );
  }

  /** Collects a step's events; false (and the stream ended) when it blocked. */
  private take(step: StreamStep<GuardedEvent>, out: GuardedEvent[]): boolean {
    for (const name of this.guard.redactedBy) this.run.acted(name, 'response', 'redact', 'finding');
    this.guard.redactedBy.clear();
    if (step.blocked) {
      this.run.acted(step.blocked, 'response', 'block', 'finding');
      // What was let out before the finding still goes (through the webhooks, which the block stops).
      this.emit(out.splice(0));
      this.block(new GuardrailStreamBlock(guardrailRefusal(step.blocked, 'response')));
      return false;
    }
    out.push(...step.released);
    return true;
  }

  /** Ends the stream with a refusal: what was held (and a batch a webhook refused) is dropped (the tap saw it). */
  private block(error: GuardrailStreamBlock): void {
    this.stopped = true;
    this.inner.abort();
    this.unapproved.length = 0;
    this.sink!.error(error);
  }

  private fault(error: unknown): void {
    if (!isPluginFault(error)) throw error;
    this.stopped = true;
    this.inner.abort();
    this.sink!.error(error);
  }

  /** Hands released events on: at once, or through the webhooks when there are any. */
  private emit(events: GuardedEvent[]): void {
    if (events.length === 0) return;
    if (this.guardrails.webhooks.length === 0) {
      this.sink!.data(events.length === 1 ? events[0]!.bytes() : Buffer.concat(events.map((event) => event.bytes())));
      return;
    }
    this.unapproved.push(...events);
    if (!this.approving) void this.approve();
  }

  /** Runs `then` once every released event went out (at once without webhooks). */
  private forward(then: () => void): void {
    if (this.approving) this.finish = then;
    else then();
  }

  /** Asks the webhooks about each batch of released events in turn, the body paused meanwhile. */
  private async approve(): Promise<void> {
    this.approving = true;
    this.inner.pause();
    while (this.unapproved.length > 0 && !this.stopped) {
      const batch = this.unapproved.splice(0);
      const refusal = await this.ask(batch);
      if (this.stopped) return;
      if (refusal) return this.block(refusal);
      this.sink!.data(Buffer.concat(batch.map((event) => event.bytes())));
    }
    this.approving = false;
    if (this.stopped) return;
    const then = this.finish;
    this.finish = undefined;
    if (then) then();
    else if (!this.relayPaused) this.inner.resume();
  }

  /** One batch through every webhook: the texts of each channel joined, and each whole text; a rewrite written back. */
  private async ask(batch: readonly GuardedEvent[]): Promise<GuardrailStreamBlock | undefined> {
    const units: { channel: string; pieces: GuardedPiece[] }[] = [];
    for (const event of batch) {
      for (const piece of event.deltas) {
        let unit = units.find((candidate) => candidate.channel === piece.channel);
        if (!unit) units.push((unit = { channel: piece.channel, pieces: [] }));
        unit.pieces.push(piece);
      }
      for (const piece of event.wholes) units.push({ channel: '', pieces: [piece] });
    }
    if (units.length === 0) return undefined;
    const texts = units.map((unit) => unit.pieces.map((piece) => piece.current).join(''));
    for (const webhook of this.guardrails.webhooks) {
      const { keyId, team, requestId } = this.run.site;
      const preceding = units.map((unit) => this.delivered.get(unit.channel) ?? '');
      const verdict = await webhook.check(texts, {
        ...this.run.context('response'),
        keyId,
        team,
        requestId,
        stream: true,
        preceding,
      });
      const refusal = this.run.webhookVerdict(webhook.name, webhook.failMode, 'response', verdict);
      if (refusal) return new GuardrailStreamBlock(refusal);
      if (verdict.kind === 'rewrite') {
        units.forEach((unit, index) => {
          if (verdict.texts[index] === texts[index]) return;
          texts[index] = verdict.texts[index]!;
          unit.pieces.forEach((piece, position) => piece.set(position === 0 ? verdict.texts[index]! : ''));
        });
      }
    }
    units.forEach((unit, index) => {
      if (unit.channel !== '')
        this.delivered.set(
          unit.channel,
          `${this.delivered.get(unit.channel) ?? ''}${texts[index]}`.slice(-PRECEDING_CHARS),
        );
    });
    return undefined;
  }
}

/**
 * The stream's body behind the request's response guardrails, which read each event as the plugin's
 * stream fixups leave it: the tap and the fixups are then applied here, not by the relay.
 */
export function guardStream(
  run: GuardrailRun,
  body: UpstreamBody,
  maxEventBytes: number,
  hooks: GuardHooks,
): UpstreamBody {
  return new GuardedBody(body, run, run.selection.response!, maxEventBytes, hooks);
}
