import type { Logger } from 'pino';
import type { Enrolment, LimitLedger } from './limit-ledger.ts';
import { endUserDigest, OTHER_END_USERS, rosterOf, type EndUserHolder } from './limit-meters.ts';

/** The default of `GATEWAY_END_USERS_PER_KEY`. */
export const DEFAULT_END_USERS_PER_KEY = 10_000;

// Answers kept at most before they are all forgotten (each is asked of the ledger again then).
const MAX_KNOWN = 100_000;

/**
 * Which end users of a key (or team) get counters of their own: the first `cap` distinct ones each UTC
 * day, kept in a roster on the limit ledger (exact across instances on Redis); the day's later ones
 * share {@link OTHER_END_USERS}, with one warning per key (or team) and day. A roster only grows within
 * its day, so each answer is kept in process until the day ends: an end user costs one ledger call a
 * day per instance.
 */
export class EndUserRoster {
  private readonly known = new Map<string, boolean>();
  private day = '';

  constructor(
    private readonly ledger: Pick<LimitLedger, 'enroll'>,
    private readonly logger: Logger,
    readonly cap: number = DEFAULT_END_USERS_PER_KEY,
  ) {}

  /** The owner of the end user's counters under `holder` today: the end user, or the shared bucket. */
  bucket(holder: EndUserHolder, endUser: string, now: number): string | Promise<string> {
    const { roster, resetAt } = rosterOf(holder, now);
    const day = roster.slice(roster.lastIndexOf(':') + 1);
    if (day !== this.day) {
      this.day = day;
      this.known.clear();
    }
    const member = endUserDigest(endUser);
    const key = `${roster}|${member}`;
    const known = this.known.get(key);
    if (known !== undefined) return known ? endUser : OTHER_END_USERS;
    const answer = this.ledger.enroll(roster, member, this.cap, resetAt);
    const decide = (enrolment: Enrolment): string => {
      if (this.known.size >= MAX_KNOWN) this.known.clear();
      this.known.set(key, enrolment === 'member');
      if (enrolment === 'first-over') this.warn(holder);
      return enrolment === 'member' ? endUser : OTHER_END_USERS;
    };
    return answer instanceof Promise ? answer.then(decide) : decide(answer);
  }

  private warn(holder: EndUserHolder): void {
    this.logger.warn(
      { [holder.scope === 'key' ? 'key_id' : 'team']: holder.name, end_users: this.cap },
      `end users: the ${holder.scope} has ${this.cap} distinct end users today (GATEWAY_END_USERS_PER_KEY); ` +
        `its further end users share one bucket, '${OTHER_END_USERS}', until the end of the UTC day`,
    );
  }
}
