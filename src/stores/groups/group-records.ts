import { badRequest } from '../../core/gateway-errors.ts';
import { generateGroupId, GROUP_NAME_RULE, isGroupName } from '../../core/group-identity.ts';
import { GROUP_FIELDS, type GroupInput, type GroupRecord } from '../../core/limits.ts';
import { applyFieldChanges, type NamedRecordKind } from '../named-records/named-record-kind.ts';
import type { GroupChanges } from './group-store.ts';

/** A group record from its input, with a new id, stamped now; the name is checked again here, whoever calls. */
export function newGroupRecord(input: GroupInput, now = new Date()): GroupRecord {
  if (!isGroupName(input.name)) throw badRequest(`A group name ${GROUP_NAME_RULE}`, 'name');
  const limits = Object.fromEntries(
    GROUP_FIELDS.flatMap((field) => (input[field] === undefined ? [] : [[field, input[field]]])),
  );
  return { id: generateGroupId(), name: input.name, createdAt: now.toISOString(), ...limits };
}

/** Budget groups as the named-record stores make, change and read them. */
export const GROUP_KIND: NamedRecordKind<GroupRecord, GroupInput, GroupChanges> = {
  noun: 'group',
  newRecord: (input) => newGroupRecord(input),
  applyChanges: (record, changes) => applyFieldChanges(record, changes, GROUP_FIELDS),
  fromStored: (stored) => stored,
};
