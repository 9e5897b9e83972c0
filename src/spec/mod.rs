//! Loading OpenAPI documents (file or URL; JSON or YAML; Swagger 2.0, OpenAPI 3.0 and 3.1),
//! `$ref` resolution, the normalized `Operation` model and per-operation argument schemas.
//! No web framework, no database.
