//! Unit tests of ranking on small inline documents.

use super::build::embedding_text;
use super::fusion::lexical_confidence;
use super::*;
use crate::spec::Spec;

const PETS: &str = r#"{
  "openapi": "3.0.0",
  "info": {"title": "t", "version": "1"},
  "paths": {
    "/pets": {
      "get": {"operationId": "listPets", "summary": "List all pets", "tags": ["pets"]},
      "post": {"operationId": "createPet", "summary": "Create a pet", "tags": ["pets"]}
    },
    "/pets/{petId}": {
      "get": {"operationId": "showPetById", "summary": "Info for a specific pet", "tags": ["pets"]},
      "delete": {"operationId": "deletePet", "summary": "Deletes a pet", "tags": ["pets"]},
      "patch": {"operationId": "updatePet", "summary": "Update a pet", "tags": ["pets"]}
    },
    "/repos/{owner}/{repo}/pulls": {
      "get": {"operationId": "pulls/list", "summary": "List pull requests", "tags": ["pulls"]}
    },
    "/chat.postMessage": {
      "post": {"operationId": "chat_postMessage", "description": "Sends a message to a channel.", "tags": ["chat"]}
    },
    "/users/{id}/suspend": {
      "put": {"operationId": "suspendUser", "summary": "Suspend a user", "tags": ["users"]}
    },
    "/legacy/suspend": {
      "put": {"operationId": "suspendUserLegacy", "summary": "Suspend a user", "deprecated": true, "tags": ["users"]}
    }
  }
}"#;

fn spec() -> Spec {
    Spec::from_bytes(PETS.as_bytes(), "pets.json").unwrap()
}

fn top(index: &Index, spec: &Spec, q: &Query<'_>) -> Vec<String> {
    index
        .search(q)
        .iter()
        .map(|h| spec.operations[h.op].id.clone())
        .collect()
}

/// Each query's first hit.
fn assert_first(cases: &[(&str, &str)]) {
    let s = spec();
    let index = Index::build(&[&s]).unwrap();
    for (query, first) in cases {
        assert_eq!(
            top(&index, &s, &Query::text(query, 5))[0],
            *first,
            "{query}"
        );
    }
}

#[test]
fn method_intent_picks_the_verb() {
    assert_first(&[
        ("remove a pet", "deletePet"),
        ("add a new pet", "createPet"),
        ("change the pet's name", "updatePet"),
    ]);
}

#[test]
fn identifiers_and_synonyms_match() {
    assert_first(&[
        ("list the PRs", "pulls/list"),
        ("post a message", "chat_postMessage"),
        ("ban this user", "suspendUser"),
    ]);
}

#[test]
fn deprecated_operations_rank_below_their_replacement() {
    let s = spec();
    let index = Index::build(&[&s]).unwrap();
    let ids = top(&index, &s, &Query::text("suspend a user", 5));
    assert_eq!(ids[..2], ["suspendUser", "suspendUserLegacy"]);
}

#[test]
fn filters_restrict_results() {
    let s = spec();
    let index = Index::build(&[&s]).unwrap();
    let q = Query {
        method: Some(crate::spec::Method::Delete),
        ..Query::text("pet", 10)
    };
    assert_eq!(top(&index, &s, &q), ["deletePet"]);
    let q = Query {
        tag: Some("Chat"),
        ..Query::text("", 10)
    };
    assert_eq!(top(&index, &s, &q), ["chat_postMessage"]);
    let only_reads = |_: usize, op: usize| !s.operations[op].mutating();
    let q = Query {
        allowed: Some(&only_reads),
        ..Query::text("pet", 10)
    };
    let ids = top(&index, &s, &q);
    assert!(!ids.is_empty());
    assert!(
        ids.iter()
            .all(|id| s.get(id).is_some_and(|o| !o.mutating()))
    );
}

#[test]
fn limit_caps_hits_and_pooled_indexes_name_their_spec() {
    let a = spec();
    let b = spec();
    let index = Index::build(&[&a, &b]).unwrap();
    assert_eq!(index.len(), 2 * a.operations.len());
    let (hits, total) = index.search_total(&Query::text("pet", 3));
    assert_eq!(hits.len(), 3);
    assert!(total > 3);
    let all = index.search(&Query::text("delete pet", 50));
    assert!(all.iter().any(|h| h.spec == 0) && all.iter().any(|h| h.spec == 1));
}

#[test]
fn index_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Index>();
}

#[test]
fn lexical_confidence_is_the_best_coverage_share() {
    // Of four concepts, the best-covered operation has three.
    assert_eq!(lexical_confidence(&[1, 3, 0, 2], 4), 0.75);
    assert_eq!(lexical_confidence(&[2, 2], 2), 1.0);
    // Coverage not counted (coordination off), or no concepts: fully trusted.
    assert_eq!(lexical_confidence(&[], 4), 1.0);
    assert_eq!(lexical_confidence(&[0, 0], 0), 1.0);
    // Nothing the query says is in the spec: the lexical side counts for nothing.
    assert_eq!(lexical_confidence(&[0, 0], 3), 0.0);
}

#[test]
fn the_embedded_text_adds_a_description_sentence_only_when_it_says_more() {
    let texts = |summary: &str, description: &str| -> [String; FIELD_COUNT] {
        [
            summary.into(),
            "listPets".into(),
            "pets".into(),
            "pets Petstore".into(),
            description.into(),
            String::new(),
        ]
    };
    assert_eq!(
        embedding_text(&texts("List pets", "List pets")),
        "List pets.  pets. pets Petstore"
    );
    assert_eq!(
        embedding_text(&texts(
            "Related artists",
            "Artists similar to a given artist. Based on listening."
        )),
        "Related artists. Artists similar to a given artist. pets. pets Petstore"
    );
}

/// A spec about one resource: "pets" is in nearly every operation, which must not make it a
/// word the index ignores.
const PETS_ONLY: &str = r#"{
  "openapi": "3.0.0",
  "info": {"title": "pets", "version": "1"},
  "paths": {
    "/pets": {
      "get": {"operationId": "listPets", "summary": "List all pets"},
      "post": {"operationId": "createPets", "summary": "Create a pet"}
    },
    "/pets/{petId}": {
      "get": {"operationId": "showPetById", "summary": "Info for a specific pet"},
      "put": {"operationId": "replacePet", "summary": "Replace a pet"},
      "delete": {"operationId": "deletePet", "summary": "Delete a pet"}
    },
    "/pets/{petId}/photos": {
      "post": {"operationId": "uploadPetPhoto", "summary": "Upload a photo of a pet"}
    },
    "/health": {
      "get": {"operationId": "health", "summary": "Service health"}
    }
  }
}"#;

#[test]
fn a_small_single_resource_spec_ranks_by_its_common_words() {
    let spec = Spec::from_bytes(PETS_ONLY.as_bytes(), "pets-only.json").unwrap();
    let index = Index::build(&[&spec]).unwrap();
    let got = top(&index, &spec, &Query::text("get all my pets", 3));
    assert_eq!(got.first().map(String::as_str), Some("listPets"), "{got:?}");
    // Every pet operation, ahead of anything else.
    let mut all = top(&index, &spec, &Query::text("pets", 10));
    all.truncate(6);
    all.sort();
    assert_eq!(
        all,
        [
            "createPets",
            "deletePet",
            "listPets",
            "replacePet",
            "showPetById",
            "uploadPetPhoto"
        ]
    );
    let got = top(&index, &spec, &Query::text("remove a pet", 3));
    assert_eq!(
        got.first().map(String::as_str),
        Some("deletePet"),
        "{got:?}"
    );
}

#[test]
fn pooled_affinity_prefers_the_smaller_api_when_both_match_alike() {
    // The same pet operations, once alone and once among 40 unrelated ones: a large API has
    // more chances of a strong match by accident, so on equal evidence the small one leads.
    let mut padded: serde_json::Value = serde_json::from_str(PETS).unwrap();
    for i in 0..40 {
        padded["paths"][format!("/widgets{i}/gadgets")] = serde_json::json!({
            "get": {"operationId": format!("frobnicate{i}"), "summary": "Frobnicate the gadgets"}
        });
    }
    let big = Spec::from_bytes(padded.to_string().as_bytes(), "big.json").unwrap();
    let small = spec();
    let q = Query::text("delete a pet", 5);
    let first_spec = |affinity_size: f32| {
        let t = Tuning {
            affinity_size,
            ..Tuning::default()
        };
        let index = Index::build_with(&[&big, &small], t).unwrap();
        index.search(&q)[0].spec
    };
    // Without the size term the two tie and document order puts the big API first.
    assert_eq!(first_spec(0.0), 0);
    assert_eq!(first_spec(0.05), 1);
}
