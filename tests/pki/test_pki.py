"""The certificate Secret's rotation rules (celkeeper.pki.plan_rotation), pure: a data map and a time in,
the data the Secret must hold out. Times are chosen, never read from the clock."""

from __future__ import annotations

import datetime

import pytest
from cryptography import x509

from celkeeper.pki import (
    CA_BUNDLE,
    CA_CERT,
    CA_KEY,
    NEXT_CA_CERT,
    NEXT_CA_SINCE,
    SERVING_CERT,
    SERVING_KEY,
    RotationPolicy,
    TLSConfigError,
    bundle_trusts,
    load_bundle,
    load_pair,
    new_ca,
    new_serving_certificate,
    pem_cert,
    pem_key,
    plan_rotation,
    trusted_bundle,
)

T0 = datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)
DAY = datetime.timedelta(days=1)
POLICY = RotationPolicy(dns_names=("svc.ns.svc", "svc.ns.svc.cluster.local"))


def fresh(now: datetime.datetime = T0) -> dict[str, bytes]:
    plan = plan_rotation({}, now, POLICY)
    assert plan is not None
    return plan.data


def verifies(data: dict[str, bytes]) -> bool:
    """The serving certificate is signed by the CA and its CA is in the trusted bundle."""
    cert = x509.load_pem_x509_certificate(data[SERVING_CERT])
    ca = x509.load_pem_x509_certificate(data[CA_CERT])
    cert.verify_directly_issued_by(ca)
    return bundle_trusts(trusted_bundle(data), data[CA_CERT])


def test_an_empty_secret_gets_a_ca_a_serving_certificate_and_a_bundle() -> None:
    data = fresh()
    assert set(data) == {CA_CERT, CA_KEY, SERVING_CERT, SERVING_KEY, CA_BUNDLE}
    assert verifies(data)
    serving = x509.load_pem_x509_certificate(data[SERVING_CERT])
    names = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(names.get_values_for_type(x509.DNSName)) == set(POLICY.dns_names)
    assert serving.not_valid_after_utc - T0 == datetime.timedelta(days=POLICY.cert_days)
    assert load_pair(data[SERVING_CERT], data[SERVING_KEY]) is not None


def test_good_data_needs_no_write_and_foreign_keys_are_kept() -> None:
    data = {**fresh(), "other": b"kept"}
    assert plan_rotation(data, T0 + 100 * DAY, POLICY) is None


def test_the_serving_certificate_is_renewed_within_the_lookahead_by_the_same_ca() -> None:
    data = fresh()
    renew_at = T0 + datetime.timedelta(days=POLICY.cert_days) - POLICY.lookahead
    assert plan_rotation(data, renew_at - DAY, POLICY) is None
    plan = plan_rotation(data, renew_at + DAY, POLICY)
    assert plan is not None and "serving certificate expires" in plan.reason
    assert plan.data[CA_CERT] == data[CA_CERT] and plan.data[CA_BUNDLE] == data[CA_BUNDLE]
    assert plan.data[SERVING_CERT] != data[SERVING_CERT]
    assert verifies(plan.data)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({SERVING_KEY: b"garbage"}, "no usable serving certificate"),
        ({SERVING_CERT: b""}, "no usable serving certificate"),
        ("other-ca", "not signed by the CA"),
        ("other-names", "does not name"),
    ],
)
def test_a_broken_serving_certificate_is_replaced(change: object, why: str) -> None:
    data = fresh()
    if change == "other-ca":
        key, ca = new_ca("someone else", 3650, T0)
        k, c = new_serving_certificate(key, ca, POLICY.dns_names, (), now=T0)
        data.update({SERVING_CERT: pem_cert(c), SERVING_KEY: pem_key(k)})
    elif change == "other-names":
        ca_pair = load_pair(data[CA_CERT], data[CA_KEY])
        assert ca_pair is not None
        k, c = new_serving_certificate(ca_pair.key, ca_pair.cert, ["elsewhere.svc"], (), now=T0)
        data.update({SERVING_CERT: pem_cert(c), SERVING_KEY: pem_key(k)})
    else:
        assert isinstance(change, dict)
        data.update(change)
    plan = plan_rotation(data, T0, POLICY)
    assert plan is not None and why in plan.reason
    assert plan.data[CA_CERT] == data[CA_CERT]
    assert verifies(plan.data)


def test_a_broken_or_expired_ca_starts_over() -> None:
    data = {**fresh(), CA_KEY: b"not a key"}
    plan = plan_rotation(data, T0, POLICY)
    assert plan is not None and "no usable CA" in plan.reason
    assert plan.data[CA_CERT] != data[CA_CERT] and verifies(plan.data)
    later = T0 + datetime.timedelta(days=POLICY.ca_days + 1)
    plan = plan_rotation(fresh(), later, POLICY)
    assert plan is not None and "expired" in plan.reason and verifies(plan.data)


def test_a_ca_is_rotated_in_two_steps_and_every_step_keeps_the_served_certificate_trusted() -> None:
    data = fresh()
    due = T0 + datetime.timedelta(days=POLICY.ca_days) - POLICY.lookahead + DAY
    # step 1: a new CA is staged in the bundle; the old one still signs what is served
    staged = plan_rotation(data, due, POLICY)
    assert staged is not None and "staged a new CA" in staged.reason and not staged.promotes_ca
    assert staged.data[CA_CERT] == data[CA_CERT]
    assert NEXT_CA_CERT in staged.data and verifies(staged.data)
    assert len(load_bundle(staged.data[CA_BUNDLE])) == 2
    assert bundle_trusts(staged.data[CA_BUNDLE], staged.data[NEXT_CA_CERT])
    # nothing more until it has been trusted for ca_overlap, and only once it is published
    assert plan_rotation(staged.data, due + POLICY.ca_overlap / 2, POLICY) is None
    after = due + POLICY.ca_overlap + datetime.timedelta(seconds=1)
    assert plan_rotation(staged.data, after, POLICY, next_ca_published=False) is None
    # step 2: the staged CA signs a new serving certificate; the old CA stays trusted
    promoted = plan_rotation(staged.data, after, POLICY)
    assert promoted is not None and promoted.promotes_ca
    assert promoted.data[CA_CERT] == staged.data[NEXT_CA_CERT]
    assert NEXT_CA_CERT not in promoted.data and NEXT_CA_SINCE not in promoted.data
    assert verifies(promoted.data)
    assert bundle_trusts(promoted.data[CA_BUNDLE], data[CA_CERT])  # old pods' certificates still verify
    # the same bytes as staged: the API servers' webhook clients (keyed by caBundle) are not rebuilt
    assert promoted.data[CA_BUNDLE] == staged.data[CA_BUNDLE]
    assert plan_rotation(promoted.data, after, POLICY) is None
    # the old CA leaves the bundle once it has expired
    old_expiry = x509.load_pem_x509_certificate(data[CA_CERT]).not_valid_after_utc
    pruned = plan_rotation(promoted.data, old_expiry + DAY, POLICY)
    assert pruned is not None
    assert not bundle_trusts(pruned.data[CA_BUNDLE], data[CA_CERT])
    assert bundle_trusts(pruned.data[CA_BUNDLE], promoted.data[CA_CERT])


def test_a_stale_staged_ca_is_dropped_when_no_rotation_is_due() -> None:
    data = fresh()
    key, ca = new_ca("stray", 3650, T0)
    data.update({NEXT_CA_CERT: pem_cert(ca), "next-ca.key": pem_key(key)})
    data[NEXT_CA_SINCE] = T0.isoformat().encode()
    plan = plan_rotation(data, T0, POLICY)
    assert plan is not None and NEXT_CA_CERT not in plan.data
    assert len(load_bundle(plan.data[CA_BUNDLE])) == 1


def test_a_policy_that_would_renew_all_the_time_is_refused() -> None:
    with pytest.raises(TLSConfigError, match="more than twice the renewal lookahead"):
        RotationPolicy(dns_names=("a.svc",), cert_days=100)
    with pytest.raises(TLSConfigError, match="at least one DNS name"):
        RotationPolicy(dns_names=())
