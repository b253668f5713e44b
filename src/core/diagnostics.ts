import { channel, subscribe, unsubscribe, type Channel } from 'node:diagnostics_channel';
import type { Actor } from './access.ts';

/**
 * The gateway's named events on `node:diagnostics_channel`, each with the type of its message. Features
 * such as the audit log subscribe to them; a message is only built when a channel has subscribers.
 */
export interface NamedChannel<T> {
  readonly name: string;
  readonly channel: Channel;
  /** Never read: carries the message type. */
  readonly message?: T;
}

function named<T>(name: string): NamedChannel<T> {
  return { name, channel: channel(name) };
}

/** What a control-plane event is about. */
export interface EventTarget {
  readonly type: 'key' | 'team' | 'token' | 'cache' | 'config' | 'session' | 'route';
  /** The key's or token's id, the team's name, a cache tenant, a route (`POST /admin/keys`), a config version. */
  readonly id?: string;
  /** The team the target belongs to, when it belongs to one (what team-scoped readers of the log see). */
  readonly team?: string | null;
}

/** Where an event comes from. */
export interface EventSource {
  /**
   * The gateway (or CLI run) that published it: several gateways may run in one process, and a
   * subscriber keeps to its own.
   */
  readonly origin: object;
  /** The door it came through. */
  readonly via: 'admin' | 'account' | 'cli' | 'config';
  /** The client address (behind trusted proxies, the client they name); absent for the CLI and reloads. */
  readonly address?: string;
}

/** A change made on the control plane: keys, teams, service tokens, cache clears, configuration reloads. */
export interface ControlPlaneChange extends EventSource {
  readonly actor: Actor;
  /** `key.create`, `key.update`, `key.revoke`, `team.create`, `team.update`, `team.delete`, `token.create`, `token.revoke`, `cache.clear`, `config.reload`. */
  readonly action: string;
  readonly target: EventTarget;
  /** The target before and after, as the admin API shows it: never a secret or its hash's input. */
  readonly before: unknown;
  readonly after: unknown;
}

/** A control-plane request refused: no or a wrong credential (401), or a role that may not do it (403). */
export interface ControlPlaneRefusal extends EventSource {
  /** Absent when no one could be told (401). */
  readonly actor?: Actor;
  /** What was tried: the permission, or `sign-in`. */
  readonly action: string;
  readonly target: EventTarget;
  readonly status: 401 | 403;
  readonly reason: string;
}

/** A sign-in to the account page, or a sign-out. */
export interface SignInEvent extends EventSource {
  readonly actor: Actor;
  readonly action: 'session.sign-in' | 'session.sign-out';
  readonly method: 'oidc' | 'admin-token';
}

/** Changes of keys, teams, tokens, the cache and the configuration. */
export const CONTROL_PLANE_CHANGE = named<ControlPlaneChange>('model-gateway:control-plane:change');
/** Refused control-plane requests and sign-ins. */
export const CONTROL_PLANE_REFUSAL = named<ControlPlaneRefusal>('model-gateway:control-plane:refusal');
/** Sign-ins and sign-outs of the account page. */
export const SIGN_IN = named<SignInEvent>('model-gateway:control-plane:sign-in');

/** Publishes the message `make` builds, only when someone listens. */
export function publish<T>(named: NamedChannel<T>, make: () => T): void {
  if (named.channel.hasSubscribers) named.channel.publish(make());
}

/** Calls `listener` with every message of the channel until the returned function is called. */
export function subscribeTo<T>(named: NamedChannel<T>, listener: (message: T) => void): () => void {
  const onMessage = (message: unknown) => listener(message as T);
  subscribe(named.name, onMessage);
  return () => void unsubscribe(named.name, onMessage);
}
