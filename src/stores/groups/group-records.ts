import { badRequest } from '../../core/gateway-errors.ts';
import { generateGroupId, GROUP_NAME_RULE, isGroupName } from '../../core/group-identity.ts';
import type { GroupInput, GroupRecord } from '../../core/limits.ts';
import type { GroupChanges } from './group-store.ts';

/** Every field of a group a change may set or remove. */
export const GROUP_CHANGEABLE = ['tpm', 'quota', 'budget', 'alerts'] as const;

/** A group record from its input, with a new id, stamped now; the name is checked again here, whoever calls. */
export function newGroupRecord(input: GroupInput, now = new Date()): GroupRecord {
  if (!isGroupName(input.name)) throw badRequest(`A group name ${GROUP_NAME_RULE}`, 'name');
  const limits = Object.fromEntries(
    GROUP_CHANGEABLE.flatMap((field) => (input[field] === undefined ? [] : [[field, input[field]]])),
  );
  return { id: generateGroupId(), name: input.name, createdAt: now.toISOString(), ...limits };
}

/** The record with the changes made: a `null` removes the field, an absent one keeps it. */
export function applyGroupChanges(record: GroupRecord, changes: GroupChanges): GroupRecord {
  const next: Record<string, unknown> = { ...record };
  for (const field of GROUP_CHANGEABLE) {
    const value = changes[field];
    if (value === null) delete next[field];
    else if (value !== undefined) next[field] = value;
  }
  return { ...(next as unknown as GroupRecord), id: record.id, name: record.name, createdAt: record.createdAt };
}
