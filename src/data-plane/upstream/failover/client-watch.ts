import type { ClientResponse } from '../../http/client-response.ts';
import { AttemptSignal } from '../attempt-signal.ts';

/**
 * Whether the client of one request went away before its answer was sent, and the cancel switch of
 * the upstream attempt running for it, pulled the moment the client goes.
 */
export class ClientWatch {
  gone = false;
  private current: AttemptSignal | undefined;

  constructor(res: ClientResponse) {
    res.once('close', () => {
      if (res.writableFinished) return;
      this.gone = true;
      this.current?.abort();
    });
  }

  /** A new cancel switch for the next attempt (also pulled by the attempt's own timeouts). */
  attemptSignal(): AttemptSignal {
    return (this.current = new AttemptSignal());
  }
}
