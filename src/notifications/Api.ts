import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { UserAuthentication } from "../identity/Domain.js"
import { InvalidRequest, NotFound } from "../platform/Errors.js"

const NotificationView = Schema.Struct({
  id: Schema.String,
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
      .setPath(Schema.Struct({ id: Schema.String }))
      .addSuccess(NotificationView)
      .addError(NotFound)
  )
  .middleware(UserAuthentication)
  .addError(InvalidRequest)
  .annotate(OpenApi.Title, "Notifications")
  .annotate(OpenApi.Description, "A user's notifications, and marking them read.")
{}
