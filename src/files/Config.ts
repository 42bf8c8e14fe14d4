import { Config, ConfigError, Effect, Either, Option, Redacted } from "effect"
import { duration, optionalSecret, optionalString, setting } from "../platform/Config.js"

export interface S3Settings {
  readonly endpoint: URL
  readonly bucket: string
  readonly accessKeyId: string
  readonly secretAccessKey: Redacted.Redacted
  readonly region: string
  /** `endpoint/bucket/key` (MinIO, most self-hosted stores) rather than `bucket.endpoint/key`. */
  readonly forcePathStyle: boolean
}

/**
 * `STORAGE_ENDPOINT` switches to an S3-compatible store; then the bucket and both keys are required. A half
 * configuration fails the start instead of silently keeping the files on local disk.
 */
const s3 = Config.all({
  endpoint: optionalString("STORAGE_ENDPOINT"),
  bucket: optionalString("STORAGE_BUCKET"),
  accessKeyId: optionalString("STORAGE_ACCESS_KEY_ID"),
  secretAccessKey: optionalSecret("STORAGE_SECRET_ACCESS_KEY"),
  region: setting("STORAGE_REGION", Config.string, "us-east-1"),
  forcePathStyle: setting("STORAGE_FORCE_PATH_STYLE", Config.boolean, true)
}).pipe(
  Config.mapOrFail((raw): Either.Either<Option.Option<S3Settings>, ConfigError.ConfigError> => {
    if (Option.isNone(raw.endpoint)) return Either.right(Option.none())
    let endpoint: URL
    try {
      endpoint = new URL(raw.endpoint.value)
    } catch {
      return Either.left(ConfigError.InvalidData(["STORAGE_ENDPOINT"], "expected an http(s) URL"))
    }
    if (endpoint.protocol !== "https:" && endpoint.protocol !== "http:") {
      return Either.left(ConfigError.InvalidData(["STORAGE_ENDPOINT"], "expected an http(s) URL"))
    }
    const required = (name: string) => Either.left(ConfigError.MissingData([name], "required when STORAGE_ENDPOINT is set"))
    if (Option.isNone(raw.bucket)) return required("STORAGE_BUCKET")
    if (Option.isNone(raw.accessKeyId)) return required("STORAGE_ACCESS_KEY_ID")
    if (Option.isNone(raw.secretAccessKey)) return required("STORAGE_SECRET_ACCESS_KEY")
    return Either.right(Option.some({
      endpoint,
      bucket: raw.bucket.value,
      accessKeyId: raw.accessKeyId.value,
      secretAccessKey: raw.secretAccessKey.value,
      region: raw.region,
      forcePathStyle: raw.forcePathStyle
    }))
  })
)

/** The settings of files and object storage (README "Settings", docs/files.md). */
export class FilesConfig extends Effect.Service<FilesConfig>()("atrium/files/FilesConfig", {
  effect: Config.all({
    /** The largest file accepted, in bytes (100 MiB). */
    maxBytes: setting("FILE_MAX_BYTES", Config.integer, 100 * 1024 * 1024).pipe(
      Config.validate({ message: "FILE_MAX_BYTES must be a positive number of bytes", validation: (n) => n > 0 })
    ),
    /** How long an upload URL, and the pending upload behind it, stay valid. */
    uploadTtl: duration("FILE_UPLOAD_TTL", "1 hour"),
    /** How long a download URL from `GET /v1/files/:id` stays valid. */
    downloadTtl: duration("FILE_DOWNLOAD_TTL", "15 minutes"),
    /** HMAC key of the embedded storage route's URLs; unset, one is derived from the JWT key. */
    signingSecret: optionalSecret("STORAGE_SIGNING_SECRET"),
    s3
  })
}) {}
