"""The simulated phone of ACEBench's agent tasks: device (Wi-Fi, login), messages, reminders, food delivery.

Written from the tools' descriptions in the data (``function`` lists of ``data_agent_*.json``) and the behaviour
the ground-truth end states show; the initial world (users, inbox, reminders, merchants) is in ``worlds/<lang>.json``.
Rules that decide an end state follow the authors' scenario classes (``phone_platform/{base_api,message,reminder,
food_services}.py``, fork yxli2123/ACEBench at e755b7c): capacity 6 for the inbox and the reminders, new ids count
on from the highest initial id, a message needs Wi-Fi and a logged-in device, an order needs a logged-in platform
user and enough balance (in Chinese a balance equal to the price is refused, as there). The authors give each app
its own copy of the device state and call ``turn_on_wifi`` on all of them; one shared :class:`Device` has the same
effect. Replies are in English in both languages.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

Reply = dict[str, Any]


def _fail(message: str) -> Reply:
    return {"status": False, "message": message}


class Device:
    """The phone itself (the authors' ``BaseApi``): ``wifi`` and ``logged_in``."""

    name = "BaseApi"
    saved = ("wifi", "logged_in")

    def __init__(self, wifi: bool = False, logged_in: bool = True) -> None:
        self.wifi = bool(wifi)
        self.logged_in = bool(logged_in)

    def turn_on_wifi(self) -> Reply:
        """Turn on Wi-Fi."""
        self.wifi = True
        return {"status": True, "message": "Wi-Fi has been turned on"}

    def login_device(self) -> Reply:
        """Log in to the device."""
        self.logged_in = True
        return {"status": True, "message": "Device has been logged in"}


class MessageApp:
    """Text messages between six users; the inbox holds at most ``max_capacity`` messages."""

    name = "MessageApi"
    saved = ("inbox",)

    def __init__(self, device: Device, world: dict[str, Any]) -> None:
        self.device = device
        self.max_capacity = int(world["max_capacity"])
        self.user_list: dict[str, dict[str, Any]] = world["user_list"]
        self.inbox: dict[int, dict[str, Any]] = {int(k): v for k, v in world["inbox"].items()}
        self.message_id_counter = max(self.inbox, default=0)

    def _user_id(self, name: str) -> str | None:
        user = self.user_list.get(name)
        return user["user_id"] if user else None

    def send_message(self, sender_name: str, receiver_name: str, message: str) -> Reply:
        """Send ``message`` from ``sender_name`` to ``receiver_name``."""
        if not self.device.logged_in:
            return _fail("Device not logged in, unable to send message")
        if not self.device.wifi:
            return _fail("Wi-Fi is turned off, cannot send messages at this time")
        if len(self.inbox) >= self.max_capacity:
            return _fail("Inbox capacity is full. You need to ask the user which message to delete.")
        sender, receiver = self._user_id(sender_name), self._user_id(receiver_name)
        if sender is None or receiver is None:
            return _fail("Sender or receiver does not exist")
        self.message_id_counter += 1
        self.inbox[self.message_id_counter] = {"sender_id": sender, "receiver_id": receiver, "message": message}
        return {"status": True, "message": f"Message successfully sent to {receiver_name}."}

    def delete_message(self, message_id: int) -> Reply:
        """Delete the message with id ``message_id``."""
        if not self.device.logged_in:
            return _fail("Device not logged in, unable to delete message")
        if message_id not in self.inbox:
            return _fail("Message ID does not exist")
        del self.inbox[message_id]
        return {"status": True, "message": f"Message ID {message_id} has been successfully deleted."}

    def view_messages_between_users(self, sender_name: str, receiver_name: str) -> Reply:
        """Messages sent from ``sender_name`` to ``receiver_name``."""
        if not self.device.logged_in:
            return _fail("Device not logged in, unable to view message information")
        sender, receiver = self._user_id(sender_name), self._user_id(receiver_name)
        if sender is None:
            return _fail("Sender does not exist")
        if receiver is None:
            return _fail("Receiver does not exist")
        found = [
            {"id": mid, "sender": sender_name, "receiver": receiver_name, "message": m["message"]}
            for mid, m in self.inbox.items()
            if m["sender_id"] == sender and m["receiver_id"] == receiver
        ]
        return {"status": True, "messages": found} if found else _fail("No related message records found")

    def search_messages(self, user_name: str, keyword: str) -> Reply:
        """Messages sent or received by ``user_name`` that contain ``keyword`` (case-insensitive)."""
        user = self._user_id(user_name)
        if user is None:
            return _fail("User does not exist")
        found = [
            {"id": mid, "sender_id": m["sender_id"], "receiver_id": m["receiver_id"], "message": m["message"]}
            for mid, m in self.inbox.items()
            if user in (m["sender_id"], m["receiver_id"]) and str(keyword).lower() in m["message"].lower()
        ]
        return {"status": True, "messages": found} if found else _fail("No messages found containing the keyword")

    def _dated(self) -> list[tuple[_dt.datetime, int]]:
        # Messages sent during the task carry no date, as in the original; they are left out of the ordering.
        return [(_dt.datetime.strptime(m["time"], "%Y-%m-%d"), mid) for mid, m in self.inbox.items() if "time" in m]

    def get_latest_message_id(self) -> Reply:
        """The id of the most recent dated message."""
        if not self.device.logged_in:
            return _fail("Device not logged in, unable to retrieve the latest sent message ID.")
        dated = self._dated()
        if not dated:
            return _fail("No message records found")
        _, mid = max(dated, key=lambda pair: pair[0])
        return {"status": True, "message": f"The latest message ID is {mid}", "message_id": mid}

    def get_earliest_message_id(self) -> Reply:
        """The id of the earliest dated message."""
        if not self.device.logged_in:
            return _fail("Device not logged in, unable to retrieve the earliest sent message ID.")
        dated = self._dated()
        if not dated:
            return _fail("No message records found")
        _, mid = min(dated, key=lambda pair: pair[0])
        return {"status": True, "message": f"The earliest message ID is {mid}", "message_id": mid}


class ReminderApp:
    """Reminders; at most ``max_capacity`` of them."""

    name = "ReminderApi"
    saved = ("reminder_list",)

    def __init__(self, device: Device, world: dict[str, Any]) -> None:
        self.device = device
        self.max_capacity = int(world["max_capacity"])
        self.reminder_list: dict[int, dict[str, Any]] = {int(k): v for k, v in world["reminder_list"].items()}
        self.reminder_id_counter = max(self.reminder_list, default=0)

    def view_reminder_by_title(self, title: str) -> Reply:
        """The reminder titled exactly ``title``."""
        if not self.device.logged_in:
            return _fail("The device is not logged in, so you cannot view notifications")
        for reminder in self.reminder_list.values():
            if reminder["title"] == title:
                return {"status": True, "reminder": reminder}
        return _fail(f"No reminder found with the title '{title}'.")

    def add_reminder(self, title: str, description: str, time: str) -> Reply:
        """Add a reminder (``time`` as ``YYYY-MM-DD HH:MM``)."""
        if not self.device.logged_in:
            return _fail("Device not logged in. Unable to add a new reminder.")
        if len(self.reminder_list) >= self.max_capacity:
            return _fail("Reminder capacity is full. Unable to add a new reminder.")
        self.reminder_id_counter += 1
        rid = self.reminder_id_counter
        self.reminder_list[rid] = {"reminder_id": rid, "title": title, "description": description, "time": time,
                                   "notified": False}
        return {"status": True, "message": f"Reminder '{title}' was successfully added."}

    def delete_reminder(self, reminder_id: int) -> Reply:
        """Delete the reminder with key ``reminder_id``."""
        if not self.device.logged_in:
            return _fail("Device not logged in. Unable to delete the specified reminder.")
        if reminder_id not in self.reminder_list:
            return _fail("Reminder ID does not exist.")
        del self.reminder_list[reminder_id]
        return {"status": True, "message": f"Reminder ID {reminder_id} was successfully deleted."}

    def view_all_reminders(self) -> Reply:
        """Every reminder."""
        if not self.reminder_list:
            return _fail("No reminders found.")
        fields = ("title", "description", "time", "notified")
        return {"status": True, "reminders": [{k: r[k] for k in fields} for r in self.reminder_list.values()]}

    def search_reminders(self, keyword: str) -> Reply:
        """Reminders whose title or description contains ``keyword`` (case-insensitive)."""
        if not self.device.logged_in:
            return _fail("The device is not logged in, so you cannot view notifications")
        needle = str(keyword).lower()
        found = [r for r in self.reminder_list.values()
                 if needle in r["title"].lower() or needle in r["description"].lower()]
        return {"status": True, "reminders": found} if found else _fail("No reminders found containing the keyword")


class FoodApp:
    """A food-delivery platform: users with balances, merchants with menus, orders."""

    name = "FoodPlatform"
    saved = ("users", "logged_in_users", "orders")

    def __init__(self, device: Device, world: dict[str, Any], language: str) -> None:
        self.device = device
        self.users: dict[str, dict[str, Any]] = world["users"]
        self.merchant_list: dict[str, dict[str, Any]] = world["merchant_list"]
        self.logged_in_users: list[str] = []
        self.orders: list[dict[str, Any]] = []
        self.refuse_exact_balance = language == "zh"

    def login_food_platform(self, username: str, password: str) -> Reply:
        """Log ``username`` in to the platform."""
        if not self.device.wifi:
            return _fail("Wi-Fi is not enabled, unable to login")
        if username not in self.users:
            return _fail("User does not exist")
        if self.users[username]["password"] != password:
            return _fail("Incorrect password")
        if username in self.logged_in_users:
            return _fail(f"{username} is already logged in")
        self.logged_in_users.append(username)
        return {"status": True, "message": f"User {username} has successfully logged in!"}

    def check_balance(self, user_name: str) -> float:
        """The platform balance of ``user_name`` (0.0 for an unknown user)."""
        user = self.users.get(user_name)
        return user["balance"] if user else 0.0

    def get_products(self, merchant_name: str) -> Any:
        """The menu of ``merchant_name``."""
        merchant = self.merchant_list.get(merchant_name)
        return merchant["menu"] if merchant else _fail(f"Merchant '{merchant_name}' does not exist")

    def add_food_delivery_order(self, username: str, merchant_name: str, items: list[dict[str, Any]]) -> Reply:
        """Order ``items`` (``[{"product": name, "quantity": n}]``) from ``merchant_name`` for ``username``."""
        if username not in self.logged_in_users:
            return _fail(f"User {username} is not logged in to the food platform")
        merchant = self.merchant_list.get(merchant_name)
        if merchant is None:
            return _fail("Merchant does not exist")
        total, ordered = 0.0, []
        for item in items or []:
            product, quantity = item.get("product"), item.get("quantity", 1)
            if not isinstance(quantity, int) or isinstance(quantity, bool) or quantity <= 0:
                return _fail(f"Invalid quantity {quantity} for product {product}")
            entry = next((p for p in merchant["menu"] if p["product"] == product), None)
            if entry is None:
                return _fail(f"Product {product} does not exist in {merchant_name}'s menu")
            total += entry["price"] * quantity
            ordered.append({"product": product, "quantity": quantity, "price_per_unit": entry["price"]})
        balance = self.users[username]["balance"]
        if total > balance or (self.refuse_exact_balance and total == balance):
            return _fail("Insufficient balance to place the order")
        self.users[username]["balance"] = balance - total
        self.orders.append({"user_name": username, "merchant_name": merchant_name, "items": ordered,
                            "total_price": total})
        return {"status": True, "message": f"Food delivery order successfully placed with {merchant_name}. "
                                           f"Total amount: {total} yuan"}
