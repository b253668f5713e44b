import type { Logger } from 'pino';
import type { InFlight } from '../../data-plane/http/client-connection.ts';
import type { Listener } from './listener.ts';

/** What a shutdown ends, in order, once the requests in flight are done or cut. */
export interface ShutdownParts {
  readonly listener: Listener;
  readonly inFlight: InFlight;
  /** Stops taking changes and answering ready (the config watch, `/readyz`), and starts the WebSockets' drain. */
  readonly stopAccepting: () => void;
  /** Ends, once the drain time is over, what the server's connections no longer hold (upgraded sockets). */
  readonly cut?: () => void;
  /** Closed in this order once every request ended: usage first, the stores last. */
  readonly closeInOrder: readonly (() => Promise<void> | void)[];
}

/** The gateway's stop: a drain bounded by `drainMs`, then every part closed. */
export interface Shutdown {
  close(drainMs: number): Promise<void>;
  /** During {@link close}: ends the requests still open now instead of at the end of the drain time. */
  endInFlight(): void;
}

/**
 * Stops accepting connections and lets requests and streams in flight finish for up to `drainMs`; then
 * ends those still open (each still gets its usage record, estimated where the upstream had not
 * reported it yet), and closes the parts in order.
 */
export function shutdown(logger: Logger, parts: ShutdownParts): Shutdown {
  const { server, metricsServer } = parts.listener;
  let endDrain: (() => void) | undefined;
  return {
    endInFlight: () => endDrain?.(),
    async close(drainMs) {
      parts.stopAccepting();
      const closed = new Promise((resolve) => server.close(resolve));
      // Keep-alive connections become idle as their last response ends: close each as it does.
      const sweep = setInterval(() => server.closeIdleConnections(), 100);
      server.closeIdleConnections();
      const drained = Promise.all([closed, parts.inFlight.idle()]).then(() => 'drained' as const);
      let timer: NodeJS.Timeout | undefined;
      const cut = new Promise<'cut'>((resolve) => {
        endDrain = () => resolve('cut');
        timer = setTimeout(endDrain, drainMs);
      });
      if ((await Promise.race([drained, cut])) === 'cut') {
        const open = parts.inFlight.count;
        logger.warn(
          { open, drainMs },
          'shutdown: drain time over, ending the requests still open (their usage is recorded, estimated where needed)',
        );
        server.closeAllConnections();
        parts.cut?.();
      }
      clearTimeout(timer);
      // Ended requests record their usage as they unwind: wait for each before closing anything.
      await drained;
      clearInterval(sweep);
      for (const close of parts.closeInOrder) await close();
      if (metricsServer) await new Promise((resolve) => metricsServer.close(resolve));
    },
  };
}
