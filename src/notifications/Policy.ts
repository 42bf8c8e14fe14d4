import type { LoginIdentity } from "../identity/Domain.js"
import type { UserId } from "../platform/Ids.js"

/**
 * Whose notification it is (issue 49: the domain's rules in one file): the person's it was written to. Only a
 * login reads them (`CurrentUser`); `NotificationsRepo` filters every read and mark by that person, so anyone else's
 * is `No notification …`, as if it did not exist.
 */
export const ownedBy = (user: LoginIdentity): UserId => user.userId
