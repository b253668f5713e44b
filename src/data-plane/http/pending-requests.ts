import type { IncomingMessage } from 'node:http';
import type { Logger } from 'pino';
import { rateLimited, type GatewayError } from '../../core/gateway-errors.ts';
import { clientAddress } from '../../core/client-address.ts';
import { bodyStillArriving, lingerAsRefusal } from './linger-close.ts';

/**
 * Caps the half-sent requests of one client address: those whose headers arrived and whose body is still
 * arriving, counted under {@link clientAddress} (behind a trusted proxy, the client it names), so that
 * one address cannot hold every connection with slow uploads. A refused request is answered 429 and
 * lingers for up to 2 s while its body arrives (see `linger-close.ts`); it counts as half-sent meanwhile.
 * Logs the first refusal of each burst of an address.
 */
export class PendingRequests {
  private readonly byAddress = new Map<string, Set<IncomingMessage>>();
  private readonly refusing = new Set<string>();

  constructor(
    private readonly max: number,
    private readonly logger: Logger,
    private readonly onRefused?: () => void,
  ) {}

  /** Calls `serve` for a request its address may send now; else answers it through `refuse`. */
  admit(req: IncomingMessage, serve: () => void, refuse: (error: GatewayError) => void): void {
    if (!bodyStillArriving(req)) return serve();
    const address = clientAddress(req);
    if (this.halfSent(address) < this.max) return this.track(address, req, serve);
    // 'request' comes as soon as the headers are read: a body sent with them (most requests) is
    // complete once the parser has gone through the rest of that read.
    setImmediate(() => {
      if (req.destroyed) return;
      if (!bodyStillArriving(req)) return serve();
      if (this.halfSent(address) < this.max) return this.track(address, req, serve);
      this.track(address, req);
      if (!this.refusing.has(address)) {
        this.refusing.add(address);
        this.logger.warn(
          { address, max_pending_requests_per_address: this.max },
          'per-address cap of half-sent requests reached: refusing this address new requests with 429',
        );
      }
      this.onRefused?.();
      lingerAsRefusal(req);
      refuse(
        rateLimited(
          `This address has too many requests still sending their body (at most ${this.max}); please retry shortly`,
          { 'Retry-After': '1' },
        ),
      );
    });
  }

  /** The half-sent requests of `address` now. */
  private halfSent(address: string): number {
    const requests = this.byAddress.get(address);
    if (requests === undefined) return 0;
    for (const req of requests)
      if (!bodyStillArriving(req) || req.destroyed || req.socket.destroyed) requests.delete(req);
    return requests.size;
  }

  private track(address: string, req: IncomingMessage, serve?: () => void): void {
    let requests = this.byAddress.get(address);
    if (requests === undefined) this.byAddress.set(address, (requests = new Set()));
    requests.add(req);
    // A request answered early is no longer the HTTP layer's: closing its socket does not destroy it.
    const socket = req.socket;
    const release = () => {
      req.off('close', release);
      socket.off('close', release);
      requests.delete(req);
      if (requests.size > 0 || this.byAddress.get(address) !== requests) return;
      this.byAddress.delete(address);
      this.refusing.delete(address);
    };
    req.once('close', release);
    socket.once('close', release);
    if (serve === undefined) return;
    this.refusing.delete(address);
    serve();
  }
}
