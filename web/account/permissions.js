// What the signed-in role may do (the session's `permissions`): the page shows only that.

let permissions = {};

export function setPermissions(granted) {
  permissions = granted ?? {};
}

/** Whether the session holds a permission over any team (`all`, or a list of team names). */
export function can(permission) {
  return permission in permissions;
}

/** Where the session holds a permission: `all`, the team names, or undefined (nowhere). */
export function scopeOf(permission) {
  return permissions[permission];
}
