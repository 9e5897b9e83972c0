//! The curated, general-purpose API vocabulary: how people say things (`ban`, `repo`, `PR`,
//! `who am I`) mapped to how API descriptions say them (`suspend`, `repository`,
//! `pull request`, `authenticated user`), and the HTTP-method intent of verbs. Nothing here
//! names a particular document; entries are everyday words for concepts that recur across
//! web APIs (code hosting, payments, clusters, chat, media, workflows, forums, shops,
//! notebooks).

use std::collections::HashMap;
use std::sync::OnceLock;

use super::analyze::{Stems, is_stop, words};
use crate::spec::Method;

/// `keys: expansions`. Each key (a word or phrase, matched after stemming) adds the
/// expansions to the query as weaker alternatives. `~ a, b, c` declares a group: every member
/// expands to every other.
const VOCABULARY: &str = r#"
# --- generic verbs ---------------------------------------------------------------------------
~ create, add, new
~ delete, remove
~ update, modify, edit, change
~ get, retrieve, fetch, read
make, generate, build: create, new
insert: create, add
register, enroll: create, add, register
set up, setup, spin up: create, new, configure
open: open, start
launch, start, begin, kick off, fire off: start, trigger, run, create
trigger, dispatch: trigger, run, dispatch, start
run, execute: run, execute, trigger, start
rerun, retry, run again, re run, restart: rerun, retry, restart, again
submit: create, submit, send
send, deliver: send, post, deliver
post, publish: post, publish, create, send
ship: release, publish, deploy
upload, attach: upload, file, attach, create
write, compose: create, write, post
leave, drop: create, add, post
invite: invite, add, member
kill, destroy, erase, wipe, purge, discard, trash, get rid, nuke: delete, remove
clear, reset: delete, clear, reset, remove
revoke, withdraw: revoke, delete, remove
cancel, abort, call off: cancel, delete, stop
terminate, shut down, shutdown: delete, terminate, stop, shutdown
uninstall: delete, remove, uninstall
rename: update, rename, name, title, move
fix, correct, amend, tweak, adjust, alter: update, edit, modify, change
close, resolve: close, update, state
reopen: reopen, update, state, open
set, configure, put: set, update, configure, replace
replace, overwrite, swap: replace, update
move, transfer, relocate: move, transfer
toggle, switch, turn: update, enable, disable, toggle, set
enable, activate, turn on, switch on: enable, activate, update
disable, deactivate, turn off, switch off: disable, deactivate, update
pause, suspend, freeze, halt, hold: pause, suspend, stop, disable
resume, unpause, continue, unfreeze: resume, start, play, enable, unpause
stop, end, finish: stop, cancel, pause, end
archive, shelve: archive, update
show, view, see, display, print: get, list, retrieve, show
list, enumerate, browse: list, all
find, search, look for, query, locate, hunt, discover: search, find, list, query, lookup
lookup, look up: lookup, get, search, find, retrieve
check, inspect, examine, verify: get, check, status, verify
count, how many, number of, tally: count, list, total, number
download, export, save as: download, export, archive, get
import, ingest, load: import, create, upload
copy, duplicate, clone: copy, clone, duplicate, fork
fork: fork, copy
approve, accept, okay, ok, sign off: approve, accept, review
reject, decline, deny, refuse: reject, decline, deny, dismiss
assign, allocate, hand over: assign, assignee, add
unassign: assignee, remove, unassign
follow, subscribe, watch: follow, subscribe, watch, subscription
unfollow, unsubscribe, unwatch, stop following: unfollow, unsubscribe, unwatch, delete, remove
ban, block, blacklist, blocklist, kick out: block, ban, suspend, silence, remove
unban, unblock, let back, reinstate, readmit: unblock, unsuspend, unsilence, remove
mute, silence, gag: silence, mute
unmute, unsilence: unsilence, unmute
like, heart, love, favorite, favourite, fave, bookmark: star, like, save, favorite, bookmark, follow
unlike, unstar, unfavorite: star, unstar, remove, delete, like, save
save, keep, store, stash, persist: save, store, create, put
pin, sticky: pin
unpin: pin, remove
notify, alert, ping, announce: notify, notification, send, webhook, event
remind, nudge: reminder, remind
schedule, plan, book: schedule, create, cron
scale, resize: scale, replicas, size
reboot, bounce, recycle: restart, delete, rollout
rollback, roll back, revert, undo: rollback, revert, undo
merge, combine, squash: merge
tag, label, categorize, mark: label, tag, mark
rate, review, grade: review, rate, rating
share, grant, give, allow, let: add, grant, permission, access, collaborator, share
log in, login, sign in, signin, authenticate, logon: login, authenticate, session, token, sign
log out, logout, sign out, signout: logout, session, delete, sign
sign up, signup, join, create account, onboard: create, signup, register, user, account
play, listen, resume playback: play, start, playback, resume
skip, next song, next track: next, skip
previous, go back, rewind, last song: previous, back
shuffle, randomize: shuffle
loop, repeat: repeat
louder, quieter, turn up, turn down, volume: volume
enqueue, queue up: queue, add
verify email, confirm: confirm, verify

# --- generic nouns ---------------------------------------------------------------------------
~ repo, repository
~ org, organization, organisation
~ config, configuration, setting, preference
~ doc, document, documentation
~ env, environment
~ info, information, detail, metadata
~ stats, statistics, metrics, analytics, insights
~ id, identifier
~ pic, picture, image, photo, avatar, icon
~ email, mail, e mail
pr, pull request, merge request, mr, patch: pull request, pull, pr
bug, ticket, defect, problem, incident: issue, bug, ticket, incident
task, todo, to do, chore: task, job, todo
job, one off, batch, work: job, task, batch, run
account, profile, person, people, somebody, individual: user, account, profile, member
member, teammate, colleague, coworker, collaborator, contributor: member, collaborator, user, team, contributor
who am i, whoami, logged in, current user, signed in, this token, my account, my profile, myself, authenticated: authenticated user, current user, me, user, self
admin, administrator, moderator, mod, staff: admin, administrator, moderator, staff, owner
owner, author, creator: owner, author, creator, user
password, passphrase, pwd: password, secret, credential
credential, credentials, secret, login details, api key, apikey: credential, secret, key, token, password, connection
token, access token: token, key, credential
key, keys: key, token, secret
permission, access, rights, privilege, role: permission, access, role, collaborator
limit, quota, throttle, throttled, rate limit, rate limited, requests left, usage: rate limit, limit, quota, usage
comment, remark, note, feedback: comment, note, review, reply
reply, respond, answer, response: reply, comment, post, response
thread, discussion, topic, conversation: topic, thread, discussion, conversation, post
message, msg, text, chat, dm, direct message, im, private message, pm: message, chat, post, im, conversation
channel, room, chatroom, chat room: channel, conversation, room
emoji, emoticon, reaction, react, thumbs up, thumbs down, smiley: reaction, emoji, react
file, attachment, upload, document: file, attachment, upload, content
folder, directory, dir: directory, folder, contents
webhook, web hook, hook, callback, callback url, endpoint url, notification url, listener: webhook, hook, endpoint, callback, event
event, activity, history, audit, timeline, feed: event, activity, history, audit, log
log, logs, output, stdout, stderr, console output, printed, print out, trace, traces: log, output
version, semver: version, release, tag
release, changelog, release notes: release, version, tag, note
ci, ci cd, pipeline, build, builds, check, checks: workflow, run, action, check, build, job, pipeline
workflow, automation: workflow, action, pipeline, dag
deploy, deployment, rollout, roll out: deployment, deploy, rollout, release, environment
branch, branches: branch, ref, head
commit, commits, changeset, revision: commit, sha, revision
code, source, source code: code, content, file, source
snippet, paste, gist: gist, snippet
star, stars, starred, stargazer: star, starred, stargazer
notification, alerts, inbox, mention, mentions: notification, mention, thread
status, state, health, alive, heartbeat, reachable, liveness, readiness, uptime, is it up, is it down: health, status, heartbeat, state
error, errors, broken, failure, failed, failing, fail, problem, crash, crashed, crashing: error, fail, failure, problem, broken
machine, host, server, vm, virtual machine, instance, worker: node, machine, host, server, instance
container, containers: container, pod
cluster, kube, k8s, kubernetes: cluster, kubernetes
namespace, project space, tenant: namespace, project
storage, disk, volume, drive: volume, storage, disk, persistent
cron, periodic, every day, daily, nightly, hourly, weekly: cron, schedule, cronjob, recurring, periodic
recurring, monthly, yearly, annual, annually, recurring charge, recurring billing: subscription, plan, interval, recurring, schedule
replica, replicas, instances, copies: replica, scale
setting, settings, options, preferences: setting, config, configuration, option, preference
variable, var, vars, env var, shared setting, global setting, key value: variable, environment
money, funds, cash, balance, earnings, how much: balance, fund, money, amount
payment, pay, charge, charges, transaction, purchase: charge, payment, transaction, intent
refund, money back, reimburse, reimbursement, give back: refund
chargeback, charge back, disputed payment: dispute, chargeback
discount, coupon, promo, promo code, promotion, voucher, percent off: coupon, discount, promotion code, promotion
subscription, plan, membership, recurring payment: subscription, plan, price
invoice, bill, billing, receipt, statement: invoice, bill, receipt
customer, client, buyer, shopper, purchaser, payer, consumer: customer
product, item, goods, merchandise, sku, offering: product, item, price
price, cost, amount, fee, pricing, rate: price, amount, fee
send money, send funds, move money, move funds: transfer, payout
payout, payouts, pay out, withdrawal, cash out, bank transfer, send to bank, to my bank: payout, transfer, bank
card, credit card, debit card, payment method: card, payment method, source
checkout, hosted page, payment page, pay link, payment link, checkout page: checkout session, payment link, checkout, session
tax, vat, gst, sales tax: tax
song, songs, track, tracks, tune, tunes, music: track, song
album, albums, record, lp, ep: album
artist, band, singer, musician, performer, group: artist
playlist, mixtape, mix: playlist
podcast, podcasts, episode, episodes: show, episode, podcast
device, speaker, phone, player: device, player, playback
playing, currently playing, now playing, listening to: currently playing, playback, player, current
liked, favorites, favourites, library, collection: saved, library, save, track
recommendation, recommendations, suggest, suggestions, similar: recommendation, related, similar
dag, dags, pipeline, pipelines, workflow, workflows, data pipeline, etl: dag, workflow, pipeline
run, runs, execution, executions, instance: run, execution, instance, dag run
attempt, try, retry: try, attempt, retry
connection, connections, connector, integration: connection, integration
pool, slot, slots: pool, slot
import error, import errors, parse error, load error: import error, error
forum, board, community, site, discussion board: forum, site, community, category
category, categories, section, sections, subforum, area, space: category, section
badge, badges, award, achievement, trophy: badge, award
group, groups, team, teams, squad, crew: group, team
pet, pets, animal, animals, dog, cat, puppy, kitten, bird, fish: pet, animal
order, orders, purchase order, purchase, buy: order, purchase
inventory, stock, supply, quantity: inventory, stock, quantity
shop, store, marketplace: store, shop
notebook, notebooks, ipynb, file, files, document: contents, notebook, file
kernel, kernels, runtime, interpreter, python, julia: kernel
terminal, terminals, shell, console, tty: terminal, shell
session, sessions: session
checkpoint, checkpoints, snapshot, snapshots, backup, restore point: checkpoint, snapshot, backup
search, query, lookup: search, query

project, projects: repository, project
# --- code hosting ----------------------------------------------------------------------------
watcher, watchers, watching: watcher, subscription, watch
follower, followers, fans, who follows, following me, follows me: follower, follow
milestone, deadline, sprint, due date: milestone
invitation, invite, invites, invitations: invitation, invite
license, licence, licensing: license
readme, read me: readme
traffic, visitors, visits, page views, views, clones: traffic, view, clone
contributor, contributors, who contributed, committers, committed the most: contributor, author, commit
language, languages, written in, programming language: language
topic, topics, keywords: topic
tarball, zip, zipball, archive file, source archive: tarball, zipball, archive, download
diff, compare, comparison, difference, differences, changes between: compare, diff
runner, runners, build agent, build machine, self hosted: runner
artifact, artifacts, build output: artifact
ssh key, public key, deploy key, signing key, gpg: key, ssh, gpg, public
markdown, render, rendering: markdown, render
protection, protect, protected, required reviews: protection, protect, rule
review, reviews, code review, reviewer, reviewers: review, reviewer
package, packages, container image, docker image, npm package, library: package
codespace, codespaces, cloud ide, online ide, dev environment: codespace
vulnerability, vulnerabilities, security alert, security alerts, cve, advisory: alert, vulnerability, advisory, dependabot, security
visibility, private, public: visibility, private, public
lock, locked, freeze conversation: lock
pages, website, static site, site hosting: page, site
emoji, emojis: emoji
# --- payments --------------------------------------------------------------------------------
top up, topup, add funds, fund: topup, fund
connected account, sub merchant, seller, vendor, merchant, platform account: account, connect
customer portal, billing portal, self serve: billing portal, portal, session
quote, estimate, proposal: quote
credit note, credit memo: credit note
trial, free trial: trial
usage, metered, metering: usage, usage record
take payment, collect payment, charge card, charge a card: payment intent, charge, payment
save card, store card, card for later, card on file: setup intent, payment method
fraud, suspicious, risk, fraudulent: fraud, early fraud warning, radar, review
identity verification, verify identity, kyc, id check: identity, verification session
virtual card, issue card, card issuing, cardholder: issuing, card, cardholder
write off, uncollectible, bad debt: uncollectible
void, nullify: void
exchange rate, currency conversion, fx: exchange rate
card reader, pos, point of sale, reader: terminal, reader
authorize, hold funds, capture funds, capture: capture, authorization
shipping, delivery, shipping cost: shipping
# --- clusters --------------------------------------------------------------------------------
app, apps, application, applications, workload, web app, service deployment: deployment, app
stateful, stateful app, stateful set: statefulset, stateful
daemon, daemons, every node, each node, node agent: daemonset, daemon
replica set, replicaset: replicaset, replica
service, services, load balancer, expose, exposed: service
ingress, route traffic, external traffic, domain routing, http route: ingress
configmap, config map, config file, configuration file: configmap, config
persistent volume, pvc, volume claim, disk claim: persistentvolumeclaim, persistent, volume, claim
cordon, drain, unschedulable, taint, maintenance, out of rotation: node, patch, unschedulable
autoscaler, autoscale, autoscaling, hpa: horizontal pod autoscaler, autoscaler
quota, quotas, resource limits, resource limit: resource quota, quota, limit range
rbac, access control, role binding: role, role binding, cluster role
service account, robot account, bot account: service account
exec, shell into, run command, execute command: exec, attach
port forward, port forwarding, tunnel: portforward, proxy
evict, eviction: eviction
certificate, certificates, cert, certs, csr, tls: certificate signing request, certificate
crd, custom resource, custom resources: custom resource definition
network policy, firewall, firewall rule: network policy
lease, leader election: lease
control plane, component, components: component status
# --- chat ------------------------------------------------------------------------------------
ephemeral, only visible, visible only, private note, whisper: ephemeral
send later, scheduled message, schedule message: schedule message, scheduled
permalink, link to message, message link: permalink
replies, thread replies, responses: replies, reply
purpose, channel description, description: purpose, topic, description
join, enter: join
leave, exit, quit, part: leave
kick, kick out, boot: kick, remove
presence, online, away, active, offline: presence, active
do not disturb, dnd, snooze, quiet hours, mute notifications: dnd, snooze
user group, user groups, usergroup, handle, mention group: usergroup, group
bot, bots, integration, integrations: bot, app
workspace, workspaces, team, slack team: team, workspace
# --- media -----------------------------------------------------------------------------------
seek, jump to, fast forward, skip ahead, position: seek, position
transfer playback, switch device, play on: transfer, playback, device
recently played, listening history, played recently, listened: recently played, recent
top artists, top tracks, most played, most listened, favorite artists, favourite artists: top, artist, track
new releases, new music, latest releases, new albums: new releases, release
featured, editorial, curated: featured
genre, genres, mood, moods: genre, category, seed
similar artists, related artists, artists like: related artist, related
audio features, tempo, bpm, danceability, energy, loudness, acoustic: audio feature, audio analysis
audiobook, audiobooks, book, books: audiobook, chapter
artwork, cover, cover art, cover image: image, cover
# --- workflows -------------------------------------------------------------------------------
xcom, xcoms, task output, return value, intermediate result: xcom, entry
plugin, plugins, provider, providers, extension, extensions: plugin, provider
dataset, datasets, data asset: dataset
mark success, mark failed, set state, force state: state, update, set
warning, warnings, happenings, what happened, occurrences, incidents: warning, event, alert
source, source code, dag code, dag file: source, dag source, file
# --- forums ----------------------------------------------------------------------------------
latest, newest, recent: latest
trending, popular, hot, hottest, most popular, best: top
reset password, forgot password, password reset, lost password: password reset, forgot password
username, handle, user name, nickname: username
anonymize, gdpr, erase personal data, forget me: anonymize
bookmark, bookmarks: bookmark
# --- shops -----------------------------------------------------------------------------------
available, for sale, sold, pending: status, available, sold
bulk, batch, several, multiple, many: list, array, bulk, batch
# --- notebooks -------------------------------------------------------------------------------
interrupt, stop execution, halt execution, cancel execution: interrupt
kernelspec, kernel spec, kernel specs, installed kernels, available kernels, language, languages: kernelspec, spec
restore, roll back to: restore, checkpoint
"#;

/// Verbs and question words that hint at an HTTP method.
const INTENTS: &[(Intent, &str)] = &[
    (
        Intent::Create,
        "create add new make generate build insert register enroll setup spin open launch start \
         begin kick trigger dispatch run execute rerun retry submit send post publish ship upload \
         attach write compose leave invite fork copy duplicate clone import signup join book \
         schedule remind enqueue reply comment categorize",
    ),
    (
        Intent::Delete,
        "delete remove kill destroy erase wipe purge discard trash nuke revoke uninstall \
         unsubscribe unfollow unstar unwatch unpin unassign cancel terminate clear",
    ),
    (
        Intent::Update,
        "update modify edit change rename fix correct amend tweak adjust alter close resolve \
         reopen set configure replace overwrite move transfer toggle switch turn enable \
         disable activate deactivate pause suspend freeze resume unpause archive lock unlock \
         mark assign scale resize ban block mute silence unban unblock approve reject star \
         like heart favorite bookmark save follow subscribe watch give grant allow share",
    ),
    (
        Intent::Read,
        "list show get fetch retrieve read view see display find search look lookup which what \
         who whose how check inspect count download export browse is are does whats",
    ),
];

/// The HTTP-method intent a query's verbs express.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Intent {
    Create,
    Delete,
    Update,
    Read,
}

impl Intent {
    /// How well `method` fits the intent, 0..=1. Soft: RPC-style APIs use POST for everything
    /// and some APIs create with PUT.
    pub(crate) fn fit(self, method: Method) -> f32 {
        match (self, method) {
            (Intent::Create, Method::Post) => 1.0,
            (Intent::Create, Method::Put) => 0.6,
            (Intent::Delete, Method::Delete) => 1.0,
            (Intent::Delete, Method::Post) => 0.3,
            (Intent::Update, Method::Patch | Method::Put) => 1.0,
            (Intent::Update, Method::Post) => 0.4,
            (Intent::Read, Method::Get) => 1.0,
            (Intent::Read, Method::Head) => 0.3,
            _ => 0.0,
        }
    }
}

/// The vocabulary, analyzed: stemmed key phrase → expansions (each a list of terms).
pub(crate) struct Vocab {
    pub(crate) entries: HashMap<Vec<String>, Vec<Vec<String>>>,
    pub(crate) intents: HashMap<String, Intent>,
    pub(crate) longest_key: usize,
}

pub(crate) fn vocab() -> &'static Vocab {
    static VOCAB: OnceLock<Vocab> = OnceLock::new();
    VOCAB.get_or_init(|| {
        let mut stems = Stems::new();
        Vocab::parse(VOCABULARY, &mut stems)
    })
}

impl Vocab {
    fn parse(text: &str, stems: &mut Stems) -> Vocab {
        let mut entries: HashMap<Vec<String>, Vec<Vec<String>>> = HashMap::new();
        let key_of = |stems: &mut Stems, phrase: &str| -> Vec<String> {
            words(phrase).iter().map(|w| stems.stem(w)).collect()
        };
        let mut add = |stems: &mut Stems, key: &str, expansion: &str| {
            let key = key_of(stems, key);
            let terms = stems.terms(expansion);
            if key.is_empty() || terms.is_empty() || terms == key {
                return;
            }
            let list = entries.entry(key).or_default();
            if !list.contains(&terms) {
                list.push(terms);
            }
        };
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if let Some(group) = line.strip_prefix('~') {
                let members: Vec<&str> = group.split(',').map(str::trim).collect();
                for a in &members {
                    for b in &members {
                        if a != b {
                            add(stems, a, b);
                        }
                    }
                }
            } else if let Some((keys, expansions)) = line.split_once(':') {
                for key in keys.split(',').map(str::trim) {
                    for e in expansions.split(',').map(str::trim) {
                        add(stems, key, e);
                    }
                }
            }
        }
        let longest_key = entries.keys().map(Vec::len).max().unwrap_or(1);
        let mut intents = HashMap::new();
        for (intent, list) in INTENTS {
            for w in list.split_whitespace() {
                intents.entry(stems.stem(w)).or_insert(*intent);
            }
        }
        Vocab {
            entries,
            intents,
            longest_key,
        }
    }
}

/// One concept of a query: what the user wrote (stemmed terms, possibly empty for phrases
/// made only of stop words such as "who am I") and the vocabulary's alternatives.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Concept {
    pub(crate) terms: Vec<String>,
    pub(crate) alternatives: Vec<Vec<String>>,
}

/// A query after analysis.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Analyzed {
    pub(crate) concepts: Vec<Concept>,
    /// Method intents in the order the query expresses them.
    pub(crate) intents: Vec<Intent>,
    /// The query asks about many things (a plural noun, "all", "which", "list").
    pub(crate) plural: bool,
    /// The query names one particular thing ("by id", "a specific", "details of").
    pub(crate) singular: bool,
}

/// Splits a query into concepts (longest vocabulary phrase first) and finds its intents.
pub(crate) fn analyze_query(text: &str, stems: &mut Stems, synonyms: bool) -> Analyzed {
    let vocab = vocab();
    // A bound on the query's size keeps the tantivy query small whatever the caller sends.
    const MAX_WORDS: usize = 48;
    let mut raw = words(text);
    raw.truncate(MAX_WORDS);
    let stemmed: Vec<String> = raw.iter().map(|w| stems.stem(w)).collect();
    let mut concepts: Vec<Concept> = Vec::new();
    let mut intents = Vec::new();
    for (w, s) in raw.iter().zip(&stemmed) {
        // Participles describe state ("running pods", "failed builds"), not the action wanted.
        // Nor do plural nouns that look like verbs ("posts", "runs").
        if w.ends_with("ing") || w.ends_with("ed") || (w.ends_with('s') && w != s) {
            continue;
        }
        if let Some(&i) = vocab.intents.get(s)
            && !intents.contains(&i)
        {
            intents.push(i);
        }
    }
    let mut i = 0;
    while i < stemmed.len() {
        let mut matched = None;
        if synonyms {
            let max = vocab.longest_key.min(stemmed.len() - i);
            for len in (1..=max).rev() {
                if let Some(alts) = vocab.entries.get(&stemmed[i..i + len]) {
                    matched = Some((len, alts));
                    break;
                }
                // Plurals the stemmer keeps (`prs`, `dms`).
                if len == 1
                    && let Some(singular) = stemmed[i].strip_suffix('s')
                    && let Some(alts) = vocab.entries.get(&[singular.to_string()][..])
                {
                    matched = Some((len, alts));
                    break;
                }
            }
        }
        let (len, alternatives) = match matched {
            Some((len, alts)) => (len, alts.clone()),
            None => (1, Vec::new()),
        };
        let terms: Vec<String> = (i..i + len)
            .filter(|&k| !is_stop(&raw[k]))
            .map(|k| stemmed[k].clone())
            .collect();
        i += len;
        if terms.is_empty() && alternatives.is_empty() {
            continue;
        }
        concepts.push(Concept {
            terms,
            alternatives,
        });
    }
    let plural = raw.iter().zip(&stemmed).any(|(w, s)| {
        matches!(w.as_str(), "all" | "every" | "which" | "list" | "many")
            || (!is_stop(w)
                && w.len() > 3
                && w.ends_with('s')
                && !w.ends_with("ss")
                && !w.ends_with("us")
                && !w.ends_with("is")
                && w != s)
    });
    let singular = raw.iter().any(|w| {
        matches!(
            w.as_str(),
            "id" | "specific" | "single" | "particular" | "details" | "detail" | "named"
        )
    });
    Analyzed {
        concepts,
        intents,
        plural,
        singular,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn analyze(q: &str) -> Analyzed {
        analyze_query(q, &mut Stems::new(), true)
    }

    #[test]
    fn synonyms_expand_words_and_phrases() {
        let a = analyze("ban a repo");
        assert_eq!(a.concepts.len(), 2);
        assert!(
            a.concepts[0]
                .alternatives
                .contains(&vec!["suspend".to_string()])
        );
        assert!(
            a.concepts[1]
                .alternatives
                .contains(&vec!["repositori".to_string()])
        );
        let a = analyze("open a PR");
        let pr = &a.concepts[1];
        assert!(
            pr.alternatives
                .contains(&vec!["pull".to_string(), "request".to_string()])
        );
        let a = analyze("who am I");
        assert_eq!(a.concepts.len(), 1);
        assert!(a.concepts[0].terms.is_empty());
        assert!(
            a.concepts[0]
                .alternatives
                .contains(&vec!["authent".to_string(), "user".to_string()])
        );
    }

    #[test]
    fn long_queries_are_bounded() {
        let long = "pets ".repeat(10_000);
        assert!(analyze(&long).concepts.len() <= 48);
    }

    #[test]
    fn without_synonyms_only_the_words_remain() {
        let a = analyze_query("remove the repo", &mut Stems::new(), false);
        assert!(a.concepts.iter().all(|c| c.alternatives.is_empty()));
        assert_eq!(a.concepts.len(), 2);
    }

    #[test]
    fn verbs_give_method_intent() {
        assert_eq!(analyze("remove a label").intents, [Intent::Delete]);
        assert_eq!(analyze("add a new label").intents, [Intent::Create]);
        assert_eq!(analyze("rename the branch").intents, [Intent::Update]);
        assert_eq!(analyze("list my gists").intents, [Intent::Read]);
        assert!(Intent::Create.fit(Method::Post) > Intent::Create.fit(Method::Put));
        assert_eq!(Intent::Read.fit(Method::Delete), 0.0);
    }
}
