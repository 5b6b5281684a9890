"""The secret store behind ${vault:NAME}: admin API, encryption at rest, rotation, resolution."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.db import connection
from django.test import Client

from tests.conftest import CANARY_SECRET_NAME
from toolgate.models import StoredSecret
from toolgate.outbound import secret_store

pytestmark = pytest.mark.django_db

VALUE = "s3cr3t-Value-for-the-payments-api"


def test_a_secret_round_trips_through_the_api_and_its_value_is_never_echoed(admin_client):
    put = admin_client.put("/secretstore/secrets/payments.key", {"value": VALUE}, format="json")
    assert put.status_code == 200 and VALUE not in put.content.decode()
    assert set(put.json()) == {"name", "updatedAt"}
    listing = admin_client.get("/secretstore/secrets")
    assert "payments.key" in [row["name"] for row in listing.json()] and VALUE not in listing.content.decode()
    assert secret_store.secret_value("payments.key") == VALUE
    assert admin_client.delete("/secretstore/secrets/payments.key").status_code == 204
    assert admin_client.delete("/secretstore/secrets/payments.key").status_code == 404
    assert "payments.key" not in [row["name"] for row in admin_client.get("/secretstore/secrets").json()]


@pytest.mark.parametrize(
    ("name", "body", "field"),
    [
        ("bad name!", {"value": "x"}, "name"),
        ("x" * 129, {"value": "x"}, "name"),
        ("ok", {}, "value"),
        ("ok", {"value": ""}, "value"),
        ("ok", {"value": 5}, "value"),
        ("ok", {"value": "x", "extra": 1}, "extra"),
    ],
)
def test_bad_input_is_400_naming_the_field_and_stores_nothing(admin_client, name, body, field):
    response = admin_client.put(f"/secretstore/secrets/{name}", body, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == field
    assert not StoredSecret.objects.exclude(name=CANARY_SECRET_NAME).exists()


def test_only_admins_manage_secrets(alice_client, approver_client, anon_client):
    for client, expected in ((anon_client, 401), (alice_client, 403), (approver_client, 403)):
        assert client.get("/secretstore/secrets").status_code == expected
        assert client.put("/secretstore/secrets/k", {"value": "v"}, format="json").status_code == expected
        assert client.delete("/secretstore/secrets/k").status_code == expected


def test_values_are_encrypted_at_rest():
    secret_store.set_secret(name="k", value=VALUE)
    with connection.cursor() as cursor:
        cursor.execute("SELECT ciphertext FROM toolgate_storedsecret WHERE name = 'k'")
        (raw,) = cursor.fetchone()
    assert VALUE not in raw and VALUE.encode().hex() not in raw
    assert raw.startswith("gAAAAA")  # a Fernet token


def test_rotation_re_encrypts_everything_under_the_newest_key(settings):
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    StoredSecret.objects.all().delete()  # start from a store encrypted under the old key only
    settings.HITL_SECRETS_KEY = old
    secret_store.set_secret(name="k", value=VALUE)
    before = StoredSecret.objects.get(name="k").ciphertext
    settings.HITL_SECRETS_KEY = f"{new},{old}"
    assert secret_store.secret_value("k") == VALUE  # old ciphertexts still decrypt
    call_command("hitl_rotate_secrets", stdout=open("/dev/null", "w"))
    assert StoredSecret.objects.get(name="k").ciphertext != before
    settings.HITL_SECRETS_KEY = new  # the old key can now be dropped
    assert secret_store.secret_value("k") == VALUE


def test_rotation_refuses_a_store_it_cannot_decrypt_and_changes_nothing(settings):
    from django.core.exceptions import ImproperlyConfigured

    secret_store.set_secret(name="k", value=VALUE)
    before = set(StoredSecret.objects.values_list("ciphertext", flat=True))
    settings.HITL_SECRETS_KEY = Fernet.generate_key().decode()  # the key that encrypted them is gone
    with pytest.raises(ImproperlyConfigured, match="cannot be decrypted") as raised:
        secret_store.rotate_all()
    assert VALUE not in str(raised.value)
    assert set(StoredSecret.objects.values_list("ciphertext", flat=True)) == before


def test_an_unknown_secret_raises_naming_the_reference():
    with pytest.raises(secret_store.UnknownSecret):
        secret_store.secret_value("missing")


def test_the_admin_page_lists_names_and_times_never_values(admin_user):
    secret_store.set_secret(name="payments.key", value=VALUE)
    browser = Client()
    browser.force_login(admin_user)
    page = browser.get("/admin/toolgate/storedsecret/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "payments.key" in html and VALUE not in html and "gAAAAA" not in html
    secret = StoredSecret.objects.get(name="payments.key")
    detail = browser.get(f"/admin/toolgate/storedsecret/{secret.pk}/change/").content.decode()
    assert VALUE not in detail and "gAAAAA" not in detail
