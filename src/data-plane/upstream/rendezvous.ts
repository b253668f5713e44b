import { hash } from 'node:crypto';
import type { RoutingSession } from './session-affinity.ts';

/** An endpoint's part in rendezvous hashing: 64 bits of SHA-256 of its name, fixed when the pool is built. */
export interface EndpointSeed {
  readonly hi: number;
  readonly lo: number;
}

/**
 * The seed of an endpoint named `name`. Derived from the name alone, so that every gateway instance
 * with the same endpoint names sends a session to the same endpoint, without talking to each other.
 */
export function endpointSeed(name: string): EndpointSeed {
  const digest = hash('sha256', `endpoint\0${name}`, 'buffer');
  return { hi: digest.readUInt32BE(0), lo: digest.readUInt32BE(4) };
}

/**
 * MurmurHash3's 32-bit finalizer: a bijection in which every input bit flips each output bit with probability about
 * 1/2.
 */
function fmix32(value: number): number {
  let h = value;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

const TWO_POW_20 = 2 ** 20;
const TWO_POW_52 = 2 ** 52;

/**
 * A number in (0, 1), uniform over sessions for one endpoint and, for one session, independent between
 * endpoints: the `hash01(session, endpoint)` of rendezvous hashing. Both inputs are already SHA-256
 * bits, so two rounds of a 32-bit mixer over the 64 bits suffice; this runs per endpoint on every pick,
 * where a SHA-256 per endpoint would cost a microsecond each.
 */
export function unitHash(session: RoutingSession, seed: EndpointSeed): number {
  const low = fmix32(session.lo ^ seed.lo);
  const high = fmix32(session.hi ^ seed.hi ^ Math.imul(low, 0x9e3779b1));
  const top = fmix32(low ^ high);
  // 52 bits (32 from `top`, 20 from `high`) + 0.5, exact in a double: strictly between 0 and 1, so ln is finite and
  // negative.
  return (top * TWO_POW_20 + (high >>> 12) + 0.5) / TWO_POW_52;
}

/**
 * The weighted rendezvous (highest random weight) score of an endpoint for a session:
 * `-weight / ln(hash01)`. The endpoint with the highest score serves the session; over many sessions
 * each endpoint wins in proportion to its weight, and taking an endpoint out moves only its own
 * sessions, each to its next-highest score.
 */
export function rendezvousScore(session: RoutingSession, seed: EndpointSeed, weight: number): number {
  return -weight / Math.log(unitHash(session, seed));
}
