import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { UserAuthentication } from "../identity/Domain.js"
import { InvalidRequest, NotFound } from "../platform/Errors.js"
import { prefixedId } from "../platform/Ids.js"

/** A notification's id (`ntf_…`). */
export const NotificationId = prefixedId("ntf", "NotificationId")
export type NotificationId = typeof NotificationId.Type

const NotificationView = Schema.Struct({
  id: NotificationId,
  kind: Schema.String,
  title: Schema.String,
  body: Schema.String,
  data: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  read: Schema.Boolean,
  read_at: Schema.NullOr(Schema.String),
  created_at: Schema.String
})

/** In-app notifications: how review outcomes reach their owner. */
export class NotificationsApi extends HttpApiGroup.make("notifications")
  .add(
    HttpApiEndpoint.get("list", "/api/notifications")
      .addSuccess(Schema.Struct({ data: Schema.Array(NotificationView), has_more: Schema.Boolean, unread: Schema.Int }))
  )
  .add(
    HttpApiEndpoint.post("read", "/api/notifications/:id/read")
      .setPath(Schema.Struct({ id: NotificationId.unchecked }))
      .addSuccess(NotificationView)
      .addError(NotFound)
  )
  .middleware(UserAuthentication)
  .addError(InvalidRequest)
  .annotate(OpenApi.Title, "Notifications")
  .annotate(OpenApi.Description, "A user's notifications, and marking them read.")
{}
